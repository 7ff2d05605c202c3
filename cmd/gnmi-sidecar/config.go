package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// configFlag names the flag that points at a YAML configuration file.
const configFlag = "config"

// applyConfigFile reads the YAML file named by --config (if given) and
// sets every flag it names that the command line did not: the command line
// overrides the file. The file is a mapping whose keys are the command's
// flag names without dashes ("listen: 127.0.0.1:9339"); a list sets a
// list flag. An unknown key, a value of the wrong shape or one the flag
// refuses fails with the file, line and key.
func applyConfigFile(flags *pflag.FlagSet) error {
	f := flags.Lookup(configFlag)
	if f == nil || f.Value.String() == "" {
		return nil
	}
	path := f.Value.String()
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--%s: %w", configFlag, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("--%s %s: %w", configFlag, path, err)
	}
	if len(doc.Content) == 0 {
		return nil // an empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("--%s %s:%d: want a mapping of option names to values", configFlag, path, root.Line)
	}
	seen := map[string]bool{}
	for k := 0; k+1 < len(root.Content); k += 2 {
		key, val := root.Content[k], root.Content[k+1]
		where := fmt.Sprintf("--%s %s:%d: %s", configFlag, path, key.Line, key.Value)
		if seen[key.Value] {
			return fmt.Errorf("%s: set twice", where)
		}
		seen[key.Value] = true
		fl := flags.Lookup(key.Value)
		if fl == nil || key.Value == configFlag || key.Value == "help" {
			return fmt.Errorf("%s: unknown option (the keys are the flag names of %q; see --help)", where, flags.Name())
		}
		value, err := flagValue(val)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if fl.Changed {
			continue // the command line wins
		}
		if err := flags.Set(key.Value, value); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	return nil
}

// flagValue renders a YAML value as a flag's textual value: a scalar as
// is, a sequence of scalars comma-separated.
func flagValue(n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "", errors.New("no value (write \"\" for an empty one)")
		}
		return n.Value, nil
	case yaml.SequenceNode:
		items := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("line %d: want a list of plain values", item.Line)
			}
			items = append(items, item.Value)
		}
		return strings.Join(items, ","), nil
	}
	return "", errors.New("want a plain value or a list, not a mapping")
}
