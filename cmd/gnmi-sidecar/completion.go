package main

import (
	"context"
	"strconv"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/spf13/cobra"
)

// Shell completion (cobra's "completion" command: bash, zsh, fish,
// powershell) completes -o's values everywhere and, asking the sidecar
// the command line names (within 2 s; nothing if it does not answer),
// proposal indexes and tag names.

// completionTimeout bounds the call a completion makes to the sidecar.
const completionTimeout = 2 * time.Second

// completeOutput registers the completion of -o on cmd.
func completeOutput(cmd *cobra.Command) {
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
}

// ask calls f on the sidecar o's flags name, for a completion: nil on any
// failure.
func (o *ops) ask(f func(ctx context.Context, c gpb.GNMIClient) ([]string, error)) []string {
	conn, err := o.dial()
	if err != nil {
		return nil
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	out, err := f(ctx, gpb.NewGNMIClient(conn))
	if err != nil {
		return nil
	}
	return out
}

// tagNames completes a tag name (and, for --to, what else a point may be).
func (o *ops) tagNames(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	names := o.ask(func(ctx context.Context, c gpb.GNMIClient) ([]string, error) {
		tags, err := fetchTags(ctx, c)
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, len(tags))
		for _, t := range tags {
			out = append(out, t.Name+"\t"+"proposal "+strconv.FormatUint(t.Index, 10))
		}
		return out, nil
	})
	return names, cobra.ShellCompDirectiveNoFileComp
}

// proposalIndexes completes a proposal index: the newest 50, newest first.
func (o *ops) proposalIndexes(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	indexes := o.ask(func(ctx context.Context, c gpb.GNMIClient) ([]string, error) {
		l, err := fetchJournalList(ctx, c, 50)
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, len(l.Proposals))
		for k := len(l.Proposals) - 1; k >= 0; k-- {
			p := l.Proposals[k]
			out = append(out, strconv.FormatUint(p.Index, 10)+"\t"+p.Phase+" "+p.ApplyStatus)
		}
		return out, nil
	})
	return indexes, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}
