//go:build devtools

package journal

// checkSharedValues: a build with the devtools tag (the tests') checks
// the writer's shortcuts as it takes them: at every read of a value it
// keeps decoded, that nothing changed it; at every record it encodes in
// parts (plainValues), that the record decodes as the message.
const checkSharedValues = true
