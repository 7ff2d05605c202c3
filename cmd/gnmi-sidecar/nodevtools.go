//go:build !devtools

package main

import (
	"io"

	"github.com/spf13/cobra"
)

// devCommands: the product build has none (see the package comment).
func devCommands(io.Writer, io.Writer) []*cobra.Command { return nil }
