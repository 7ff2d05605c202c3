//go:build devtools

package main

import (
	"io"

	"github.com/spf13/cobra"
)

// devCommands are the developer commands of a devtools build.
func devCommands(stdout, stderr io.Writer) []*cobra.Command {
	return []*cobra.Command{newDemoCommand(stdout, stderr)}
}
