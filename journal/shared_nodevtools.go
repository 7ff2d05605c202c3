//go:build !devtools

package journal

// checkSharedValues: see shared_devtools.go.
const checkSharedValues = false
