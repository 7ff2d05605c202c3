package main

// The operator commands: journal list|show, rollback, commit
// confirm|cancel|extend and status. They talk to a running sidecar over
// gNMI only (its introspection tree, docs/introspection.md, and Sets with
// extensions), never to the journal's database. See docs/cli.md.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"github.com/openconfig/ygot/ygot"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	terminal "golang.org/x/term"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gnmi-sidecar/gnmi-sidecar/client"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy"
	"github.com/gnmi-sidecar/gnmi-sidecar/proxy/sidecarpb"
)

// Exit codes of gnmi-sidecar (docs/cli.md).
const (
	exitOK           = 0
	exitFailed       = 1 // the sidecar refused or failed the operation
	exitUsage        = 2 // bad command line
	exitUnreachable  = 3 // the sidecar could not be reached, or timed out; the device's configuration cannot be read
	exitNotFound     = 4 // no such proposal, nothing to roll back
	exitPrecondition = 5 // e.g. nothing to confirm; not the newest change
	// exitDifferences (6) is drift's and diff's (drift.go).
	exitDenied            = 7 // not authenticated or not allowed (UNAUTHENTICATED, PERMISSION_DENIED)
	exitDeviceRefused     = 8 // the device refused the change (or the rollback): its code and message
	exitDeviceUnreachable = 9 // the sidecar answered, but its device is not connected
)

const exitCodesHelp = `Exit codes:
  0  success
  1  the sidecar refused or failed the operation (any other gRPC error)
  2  bad command line (unknown command or flag, bad index, bad duration)
  3  the sidecar could not be reached or timed out (UNAVAILABLE, DEADLINE_EXCEEDED):
     nothing listens, the name does not resolve, TLS does not match, or what
     answers is not a gnmi-sidecar; drift, diff and status: the device's
     configuration cannot be read
  4  not found (NOT_FOUND: no such proposal or tag, nothing to roll back)
  5  precondition failed (FAILED_PRECONDITION: nothing to confirm, a newer change
     must be rolled back first, ...)
  6  differences found: drift and diff found the device's configuration
     differing from the journal's
  7  not authenticated or not allowed (UNAUTHENTICATED: credentials missing or
     not accepted; PERMISSION_DENIED: the identity's role does not allow it)
  8  the device refused the change or the rollback (its code and message are
     printed; the journal records the proposal as failed)
  9  the sidecar answered, but its device is not connected (nothing journaled)`

// opsPasswordEnv holds the password sent to the sidecar: never a flag, so
// it does not show in ps.
const opsPasswordEnv = "GNMI_SIDECAR_PASSWORD"

// exitError is an error with the process exit code it calls for.
type exitError struct {
	code int
	err  error
	// cause is the failed call's own error, if err describes one
	// (failed): what reached tells the sidecar's absence by.
	cause error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the process exit code for err, the error of the root
// command's Execute: 0 for nil, the code of an exitError, else 1.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitFailed
}

// grpcExitCode maps the gRPC code of a failed call to an exit code.
func grpcExitCode(c codes.Code) int {
	switch c {
	case codes.Unavailable, codes.DeadlineExceeded:
		return exitUnreachable
	case codes.NotFound:
		return exitNotFound
	case codes.FailedPrecondition:
		return exitPrecondition
	case codes.Unauthenticated, codes.PermissionDenied:
		return exitDenied
	}
	return exitFailed
}

// failed describes a failed call: "<what>: <gRPC message>", with the exit
// code of its gRPC code. It sees through wrapping: the client package's
// calls (client.Do and those built on it) wrap the status in what they did.
func failed(what string, err error) error {
	msg := err.Error()
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) && se.GRPCStatus() != nil {
		msg = se.GRPCStatus().Message()
	}
	return &exitError{code: exitCodeOf(err), err: fmt.Errorf("%s: %s", what, msg), cause: err}
}

// exitCodeOf is the exit code of a failed call: the device's refusal of a
// change or rollback (the sidecar's Response detail: apply FAILED) and the
// sidecar's own "device unreachable" (its ErrorInfo) have codes of their
// own, whatever their gRPC code; else grpcExitCode.
func exitCodeOf(err error) int {
	if r, ok := client.ResponseFromError(err); ok &&
		(r.GetApply() == sidecarpb.Status_STATUS_FAILED) {
		return exitDeviceRefused
	}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			info, ok := d.(*errdetails.ErrorInfo)
			switch {
			case !ok || info.GetDomain() != proxy.ErrorDomain:
			case info.GetReason() == proxy.ReasonDeviceUnreachable:
				return exitDeviceUnreachable
			case info.GetReason() == proxy.ReasonDeviceWouldRefuse:
				return exitDeviceRefused
			}
		}
	}
	return grpcExitCode(status.Code(err))
}

// unreached rewrites the failure of a call to the sidecar at addr as one
// sentence when no sidecar answered there (exit 3): nothing listens, the
// name does not resolve, TLS does not match, or what answers does not
// serve the sidecar's origin (it is no gnmi-sidecar: the device itself,
// say). It returns nil for any other failure.
func unreached(addr string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	msg := st.Message()
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(msg, w) {
				return true
			}
		}
		return false
	}
	var why string
	switch {
	case st.Code() == codes.Unavailable && has("connection refused"):
		why = fmt.Sprintf("nothing listens at %s (connection refused): is the sidecar running there, and is --address right?", addr)
	case st.Code() == codes.Unavailable && has("produced zero addresses", "no such host", "name resolver", "server misbehaving"):
		why = fmt.Sprintf("the name in %s does not resolve: check --address", addr)
	case st.Code() == codes.Unavailable && has("tls:", "x509:", "handshake", "TLS"):
		why = fmt.Sprintf("TLS does not match at %s (%s): give --tls-ca (or --tls-skip-verify) for a sidecar serving TLS, and no TLS flag for one serving plaintext", addr, msg)
	case st.Code() != codes.Unavailable && has("origin") && has(introspectionOrigin) && !has("authoriz", "permission", "role"):
		why = fmt.Sprintf("%s is not a gnmi-sidecar: it does not serve the origin %s (is it the device itself?)", addr, introspectionOrigin)
	default:
		return nil
	}
	return &exitError{code: exitUnreachable, err: errors.New(why), cause: err}
}

// newOpsCommands returns the operator commands: they talk to a running
// sidecar over gNMI (docs/cli.md).
func newOpsCommands(stdout, stderr io.Writer) []*cobra.Command {
	return []*cobra.Command{newJournalCommand(stdout, stderr), newRollbackCommand(stdout, stderr),
		newCommitCommand(stdout, stderr), newStatusCommand(stdout, stderr), newResolveCommand(stdout, stderr),
		newSetCommand(stdout, stderr), newDriftCommand(stdout, stderr), newDiffCommand(stdout, stderr),
		newSyncFromCommand(stdout, stderr)}
}

// --- common flags ---

// opsConfig holds the flags every operator command shares.
type opsConfig struct {
	address       string
	timeout       time.Duration
	tls           bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsServerName string
	tlsSkipVerify bool
	insecure      bool
	username      string
	output        string
}

// The environment variables that give the connection flags' defaults, as
// gnmic's GNMIC_ADDRESS and GNMIC_USERNAME do.
const (
	opsAddressEnv  = "GNMI_SIDECAR_ADDRESS"
	opsUsernameEnv = "GNMI_SIDECAR_USERNAME"
)

// envOr returns the environment variable name's value, def if unset.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func (c *opsConfig) addFlags(f *pflag.FlagSet) {
	f.StringVarP(&c.address, "address", "a", envOr(opsAddressEnv, "127.0.0.1:9339"), "the sidecar's gNMI address, host:port (default from $"+opsAddressEnv+")")
	f.DurationVar(&c.timeout, "timeout", 30*time.Second, "longest the command may take (rollback and commit cancel wait for the device: allow for it); 0: no limit")
	f.BoolVar(&c.tls, "tls", false, "connect with TLS (implied by the other --tls-* flags)")
	f.StringVar(&c.tlsCA, "tls-ca", "", "PEM file of the CA that signed the sidecar's certificate (default: the system roots)")
	f.StringVar(&c.tlsCert, "tls-cert", "", "PEM client certificate (mTLS); needs --tls-key")
	f.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&c.tlsServerName, "tls-server-name", "", "name to verify the sidecar's certificate against (default: the host of --address)")
	f.BoolVar(&c.tlsSkipVerify, "tls-skip-verify", false, "do not verify the sidecar's certificate (lab use only)")
	f.BoolVar(&c.tlsSkipVerify, "skip-verify", false, "the same as --tls-skip-verify (gnmic's name)")
	f.BoolVar(&c.insecure, "insecure", false, "plaintext, without TLS (the default without a --tls flag; gnmic's name)")
	f.StringVarP(&c.username, "username", "u", envOr(opsUsernameEnv, ""), "username sent to the sidecar (default from $"+opsUsernameEnv+"); the password is read from $"+opsPasswordEnv)
	f.StringVarP(&c.output, "output", "o", "text", "output format: text or json")
}

// tlsConfig builds the TLS configuration, nil for plaintext.
func (c *opsConfig) tlsConfig() (*tls.Config, error) {
	return clientTLS{prefix: "tls-", on: c.tls, ca: c.tlsCA, cert: c.tlsCert, key: c.tlsKey,
		serverName: c.tlsServerName, skipVerify: c.tlsSkipVerify}.config()
}

// check validates the flags that need more than their type.
func (c *opsConfig) check() error {
	if c.output != "text" && c.output != "json" {
		return fmt.Errorf("--output %q: want text or json", c.output)
	}
	if c.timeout < 0 {
		return fmt.Errorf("--timeout %v: must not be negative", c.timeout)
	}
	if c.address == "" {
		return errors.New("--address must not be empty")
	}
	if c.insecure && (c.tls || c.tlsCA != "" || c.tlsCert != "" || c.tlsKey != "" || c.tlsServerName != "" || c.tlsSkipVerify) {
		return errors.New("--insecure (plaintext) contradicts the --tls flags: give one or the other")
	}
	return nil
}

// --- running a command ---

// ops is one operator command's flags and output streams.
type ops struct {
	cfg            opsConfig
	stdout, stderr io.Writer
}

// command finishes cmd as an operator command: it prints its own errors
// (one line, "gnmi-sidecar: ..."), and its usage errors exit 2.
func (o *ops) command(cmd *cobra.Command) *cobra.Command {
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return o.usage(c, err) })
	return cmd
}

// usage prints a command-line error (one line) and returns it with exit
// code 2.
func (o *ops) usage(cmd *cobra.Command, err error) error {
	fmt.Fprintf(o.stderr, "gnmi-sidecar: %s: %v (see '%s --help')\n", strings.TrimPrefix(cmd.CommandPath(), "gnmi-sidecar "), err, cmd.CommandPath())
	return &exitError{code: exitUsage, err: err}
}

// args wraps an argument check so that its failure is a usage error.
func (o *ops) args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return o.usage(cmd, err)
		}
		return nil
	}
}

// group is a command that only holds subcommands: with no subcommand, or
// an unknown one, it is a usage error.
func (o *ops) group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = o.args(func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown command %q", args[0])
		}
		return errors.New("missing command")
	})
	cmd.RunE = func(*cobra.Command, []string) error { return nil } // unreachable: Args refuses every call
	return o.command(cmd)
}

// run connects to the sidecar and calls f with a context bounded by
// --timeout and carrying the credentials. f's error is printed; an error
// that is not an exitError exits 1.
func (o *ops) run(cmd *cobra.Command, f func(ctx context.Context, c gpb.GNMIClient) error) error {
	if err := o.cfg.check(); err != nil {
		return o.usage(cmd, err)
	}
	conn, err := o.dial()
	if err != nil {
		return o.usage(cmd, err)
	}
	defer conn.Close()
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if o.cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.cfg.timeout)
		defer cancel()
	}
	if o.cfg.username != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "username", o.cfg.username, "password", os.Getenv(opsPasswordEnv))
	}
	err = f(ctx, gpb.NewGNMIClient(conn))
	if err == nil {
		return nil
	}
	var e *exitError
	if !errors.As(err, &e) {
		err = &exitError{code: exitFailed, err: err, cause: err}
		errors.As(err, &e)
	}
	if u := unreached(o.cfg.address, e.cause); u != nil {
		err = u
	}
	fmt.Fprintf(o.stderr, "gnmi-sidecar: %v\n", err)
	return err
}

// dial makes the client connection to the sidecar the flags name (gRPC
// connects lazily, at the first call).
func (o *ops) dial() (*grpc.ClientConn, error) {
	tlsCfg, err := o.cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	conn, err := grpc.NewClient(o.cfg.address, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return nil, fmt.Errorf("--address %q: %w", o.cfg.address, err)
	}
	return conn, nil
}

// printJSON writes v as one indented JSON document.
func (o *ops) printJSON(v any) error {
	enc := json.NewEncoder(o.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func (o *ops) json() bool { return o.cfg.output == "json" }

// parseIndex parses a proposal index (1, 2, ...).
func parseIndex(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("invalid proposal index %q: want a positive integer", s)
	}
	return n, nil
}

// indexArg checks that the argument at position i, if present, is a
// proposal index.
func indexArg(i int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > i {
			_, err := parseIndex(args[i])
			return err
		}
		return nil
	}
}

// Text output widths: values, authors, comments and errors are cut in
// tables only.
const (
	maxValueWidth   = 40
	maxErrorWidth   = 60
	maxAuthorWidth  = 40
	maxCommentWidth = 30
)

// orDash is s, or "-" when it is empty: a table cell that is never blank.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// newTable returns a writer aligning tab-separated cells, flushed by
// Flush; lines lose the padding of empty last cells.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(&trimWriter{w: w}, 0, 0, 2, ' ', 0)
}

// trimWriter removes the spaces that end lines.
type trimWriter struct {
	w       io.Writer
	pending []byte // spaces not yet known to end a line
}

func (t *trimWriter) Write(p []byte) (int, error) {
	var out []byte
	for _, b := range p {
		switch b {
		case ' ':
			t.pending = append(t.pending, b)
			continue
		case '\n':
			t.pending = t.pending[:0]
		default:
			out = append(out, t.pending...)
			t.pending = t.pending[:0]
		}
		out = append(out, b)
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// keyValues prints "key: value" lines, values aligned, each line indented
// by indent; empty values are skipped.
func keyValues(w io.Writer, indent string, kv ...string) error {
	tw := newTable(w)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		fmt.Fprintf(tw, "%s%s:\t%s\n", indent, kv[i], kv[i+1])
	}
	return tw.Flush()
}

// optBool is "true", or "" (left out) for false.
func optBool(b bool) string {
	if b {
		return "true"
	}
	return ""
}

func optTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmtTime(t)
}

// retryingText describes the acknowledged change being sent again, "" if
// none.
func retryingText(d DeviceState) string {
	if d.Retrying == nil {
		return ""
	}
	text := fmt.Sprintf("proposal %d", *d.Retrying)
	if d.RetryingAttempts != nil {
		text += fmt.Sprintf(", %d sends", *d.RetryingAttempts)
	}
	if !d.RetryingSince.IsZero() {
		text += ", since " + d.RetryingSince.Format(time.RFC3339)
	}
	return text
}

func optUintText(n *uint64) string {
	if n == nil {
		return ""
	}
	return strconv.FormatUint(*n, 10)
}

// --- journal ---

func newJournalCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &ops{stdout: stdout, stderr: stderr}
	cmd := o.group(&cobra.Command{
		Use:   "journal",
		Short: "Show the proposals the sidecar journaled",
		Long: `journal lists and shows the proposals (one per gNMI Set) of a running
sidecar, read over gNMI from its introspection tree.

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	o.cfg.addFlags(cmd.PersistentFlags())
	cmd.AddCommand(newJournalListCommand(o), newJournalShowCommand(o), newJournalTagCommand(o), newJournalTagsCommand(o))
	return cmd
}

func newJournalListCommand(o *ops) *cobra.Command {
	var limit int
	var failedOnly bool
	cmd := o.command(&cobra.Command{
		Use:   "list [--limit N] [--failed]",
		Short: "List the newest proposals, oldest first",
		Long: `list prints the newest --limit proposals (0: all the journal keeps), oldest
first, one row each: INDEX, PHASE, COMMIT and APPLY (the statuses of the
change, or of its rollback once the phase is ROLLBACK), PROPOSED (UTC),
AUTHOR (who sent the Set: certificate subject, username or host), ROLLED
BACK BY (who asked for its rollback, or cancelled its commit-confirmed;
"-" for the sidecar's own: an expired commit-confirmed), OPS
(operations of the Set), COMMENT (its comment, cut) and ERROR. With
--failed, only those among
them whose change did not take effect (commit or apply FAILED or ABORTED:
an ASYNC client was answered before that) or whose rollback the device
refused; --limit 0 --failed lists every such proposal the journal keeps.

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	cmd.Args = o.args(cobra.NoArgs)
	cmd.Flags().IntVarP(&limit, "limit", "n", 20, "how many of the newest proposals to list (0: all)")
	cmd.Flags().BoolVar(&failedOnly, "failed", false, "only the proposals that failed or were aborted, or whose rollback the device refused")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if limit < 0 {
			return o.usage(cmd, fmt.Errorf("--limit %d: must not be negative", limit))
		}
		return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
			l, err := fetchJournalList(ctx, c, uint64(limit))
			if err != nil {
				return failed("list the journal", err)
			}
			if failedOnly {
				l.Proposals = slices.DeleteFunc(l.Proposals, func(p ProposalState) bool { return !p.Unsuccessful() })
			}
			if o.json() {
				return o.printJSON(l)
			}
			return printJournalList(o.stdout, l)
		})
	}
	return cmd
}

func printJournalList(w io.Writer, l *JournalList) error {
	if len(l.Proposals) == 0 {
		_, err := fmt.Fprintln(w, "no proposals in the journal")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "INDEX\tPHASE\tCOMMIT\tAPPLY\tPROPOSED\tAUTHOR\tROLLED BACK BY\tOPS\tCOMMENT\tERROR")
	for _, p := range l.Proposals {
		commit, apply := p.Statuses()
		rolledBackBy := ""
		if p.Phase == "ROLLBACK" {
			rolledBackBy = truncate(p.RollbackAuthor, maxAuthorWidth)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", p.Index, p.Phase, commit, apply,
			fmtTime(p.Proposed), orDash(truncate(p.Author, maxAuthorWidth)), orDash(rolledBackBy), p.Operations,
			orDash(truncate(p.Comment, maxCommentWidth)), truncate(p.Error(), maxErrorWidth))
	}
	return tw.Flush()
}

func newJournalShowCommand(o *ops) *cobra.Command {
	var diff bool
	cmd := o.command(&cobra.Command{
		Use:   "show INDEX [--diff]",
		Short: "Show one proposal: its state and what it changed",
		Long: `show prints proposal INDEX's state as "key: value" lines (the leaf names of
docs/introspection.md), then what its commit changed: PATH, OLD (what the
path held before, "-" if nothing) and NEW (the value written, or
"(deleted)"). A proposal not committed yet shows the Set's operations
instead.

With --diff it prints only the leaf-level before → after of the change,
as a diff: "- PATH: VALUE" for what a leaf held before, "+ PATH: VALUE"
for what it holds after (values whole, not cut); -o json prints
{"index", "diff": [{"path", "old", "new"}]}, null for nothing.

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	cmd.Args = o.args(cobra.MatchAll(cobra.ExactArgs(1), indexArg(0)))
	cmd.ValidArgsFunction = o.proposalIndexes
	cmd.Flags().BoolVar(&diff, "diff", false, "print the change's leaf-level before → after as a diff")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		index, _ := parseIndex(args[0]) // checked by Args
		return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
			d, err := fetchProposal(ctx, c, index)
			if err != nil {
				return failed(fmt.Sprintf("show proposal %d", index), err)
			}
			if diff {
				return o.printProposalDiff(d)
			}
			if o.json() {
				return o.printJSON(d)
			}
			return printProposal(o.stdout, d)
		})
	}
	return cmd
}

// changesDiff is what a proposal's changes did, leaf by leaf (what each
// path held before → what it holds after), or with undo what undoing them
// would do; a delete of nothing and a value written again are left out.
func changesDiff(changes []ChangeView, undo bool) []DiffEntry {
	diff := []DiffEntry{}
	for _, c := range changes {
		var before, after *Value
		if !c.PreviousDeleted {
			before = c.PreviousValue
		}
		if !c.Deleted {
			after = c.Value
		}
		if undo {
			before, after = after, before
		}
		if (before == nil && after == nil) || (before != nil && after != nil && leaves.Equal(before.TV, after.TV)) {
			continue
		}
		diff = append(diff, DiffEntry{Path: c.Path, Old: before, New: after})
	}
	return diff
}

// ProposalDiff is what `journal show --diff -o json` prints.
type ProposalDiff struct {
	Index uint64      `json:"index"`
	Diff  []DiffEntry `json:"diff"`
}

// printProposalDiff prints what proposal d's change did, leaf by leaf.
func (o *ops) printProposalDiff(d *ProposalDetail) error {
	out := ProposalDiff{Index: d.State.Index, Diff: changesDiff(d.Changes, false)}
	if o.json() {
		return o.printJSON(out)
	}
	p := d.State
	head := fmt.Sprintf("proposal %d", p.Index)
	if p.Author != "" {
		head += " by " + p.Author
	}
	if !p.Proposed.IsZero() {
		head += ", " + fmtTime(p.Proposed)
	}
	if p.Comment != "" {
		head += ": " + strconv.Quote(p.Comment)
	}
	fmt.Fprintln(o.stdout, head)
	switch {
	case len(d.Changes) == 0:
		_, err := fmt.Fprintln(o.stdout, "no changes recorded (not committed)")
		return err
	case p.Phase == "ROLLBACK":
		fmt.Fprintf(o.stdout, "(rolled back since: rollback %s)\n", strings.ToLower(p.RollbackApplyStatus))
	}
	return printLeafChanges(o.stdout, out.Diff)
}

// unknownOld is what a dry run shows as the old value of a path its Delete
// or Replace removes and the journal holds nothing at or under.
const unknownOld = "(whatever the device holds there; the journal holds nothing here)"

// printLeafChanges prints leaf changes as "- PATH: OLD" / "+ PATH: NEW" lines.
func printLeafChanges(w io.Writer, diff []DiffEntry) error {
	for _, e := range diff {
		switch {
		case e.Old != nil:
			fmt.Fprintf(w, "- %s: %s\n", e.Path, truncate(e.Old.Text(), 0))
		case e.OldUnknown:
			fmt.Fprintf(w, "- %s: %s\n", e.Path, unknownOld)
		}
		if e.New != nil {
			if _, err := fmt.Fprintf(w, "+ %s: %s\n", e.Path, truncate(e.New.Text(), 0)); err != nil {
				return err
			}
		}
	}
	return nil
}

func printProposal(w io.Writer, d *ProposalDetail) error {
	p := d.State
	if err := keyValues(w, "",
		"index", strconv.FormatUint(p.Index, 10),
		"phase", p.Phase,
		"commit-status", p.CommitStatus,
		"apply-status", p.ApplyStatus,
		"proposed", optTime(p.Proposed),
		"committed", optTime(p.Committed),
		"apply-started", optTime(p.ApplyStarted),
		"applied", optTime(p.Applied),
		"error", p.Error(),
		"operations", strconv.FormatUint(p.Operations, 10),
		"author", p.Author,
		"comment", p.Comment,
		"target", p.Target,
		"adopted", optBool(p.Adopted),
		"restores-index", optUintText(p.RestoresIndex),
		"restores-tag", p.RestoresTag,
		"rollback-index", optUintText(p.RollbackIndex),
		"rollback-commit-status", p.RollbackCommitStatus,
		"rollback-apply-status", p.RollbackApplyStatus,
		"rollback-proposed", optTime(p.RollbackProposed),
		"rollback-committed", optTime(p.RollbackCommitted),
		"rollback-apply-started", optTime(p.RollbackApplyStarted),
		"rollback-applied", optTime(p.RollbackApplied),
		"rollback-error", strings.TrimSpace(strings.TrimSuffix(p.RollbackErrorCode+": "+p.RollbackErrorMessage, ": ")),
		"rollback-author", p.RollbackAuthor,
		"rollback-comment", p.RollbackComment,
		"commit-confirmed-by", p.CommitConfirmedBy,
		"commit-confirmed-at", optTime(p.CommitConfirmedAt),
		"commit-cancelled-by", p.CommitCancelledBy,
		"commit-cancelled-at", optTime(p.CommitCancelledAt),
		"commit-extended-by", p.CommitExtendedBy,
		"commit-extended-at", optTime(p.CommitExtendedAt),
	); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	switch {
	case len(d.Changes) > 0:
		fmt.Fprintln(tw, "PATH\tOLD\tNEW")
		for _, c := range d.Changes {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Path, c.Old(maxValueWidth), c.New(maxValueWidth))
		}
	case len(d.Operations) > 0:
		fmt.Fprintln(tw, "no changes recorded (not committed); the Set's operations:")
		fmt.Fprintln(tw, "SEQ\tKIND\tPATH\tVALUE")
		for _, op := range d.Operations {
			v := "-"
			if op.Value != nil {
				v = truncate(op.Value.Text(), maxValueWidth)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", op.Seq, op.Kind, op.Path, v)
		}
	default:
		fmt.Fprintln(tw, "no changes recorded")
	}
	return tw.Flush()
}

// --- rollback ---

func newRollbackCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &ops{stdout: stdout, stderr: stderr}
	var async, dryRun, yes bool
	var to, comment string
	cmd := o.command(&cobra.Command{
		Use:   "rollback [INDEX] | rollback --to TAG|INDEX [--dry-run] [--yes]",
		Short: "Roll back a proposal (default: the newest change in effect), or every change since a point",
		Long: `rollback rolls back proposal INDEX, or without INDEX the newest change not
yet rolled back, and by default returns once the device holds the
rolled-back configuration (--async: once the rollback is committed in the
journal). Changes roll back newest first: rolling back a proposal that a
newer change in effect follows fails with exit code 5.

With --to TAG (a name given with "journal tag") or --to INDEX (right after
proposal INDEX was committed; 0: before the journal's first change), every
change made since that point is rolled back as one operation: one new
change that writes back what every path changed since held there, sent to
the device as one SetRequest (atomic on the device) and recorded as one
journal proposal (its restores-index and restores-tag name the point; it
can itself be rolled back). If the configuration is as at the point
already, nothing is journaled and the command says so (exit code 0).
A point older than the history retention keeps fails with exit code 5.

--comment is recorded with the rollback (journal show).

--dry-run prints what the rollback would change, leaf by leaf ("- PATH:
VALUE NOW", "+ PATH: VALUE AFTER"), without journaling or applying
anything; a rollback that would be refused fails the same way.

On a terminal, rollback --to first shows that change and asks before
going on; --yes goes on without asking (as does any run whose input is
not a terminal: a script's).

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	cmd.Args = o.args(cobra.MatchAll(cobra.MaximumNArgs(1), indexArg(0), func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 && cmd.Flags().Changed("to") {
			return errors.New("give a proposal to roll back (INDEX) or a point to go back to (--to), not both")
		}
		return nil
	}))
	o.cfg.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&async, "async", false, "return once the rollback is committed, before the device applied it")
	cmd.Flags().StringVar(&to, "to", "", "roll back every change made after this point: a tag name, or a proposal index (0: every change)")
	cmd.Flags().StringVar(&comment, "comment", "", "why: recorded with the rollback in the journal")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what the rollback would change; journal and apply nothing")
	cmd.ValidArgsFunction = o.proposalIndexes
	_ = cmd.RegisterFlagCompletionFunc("to", o.tagNames)
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "rollback --to: go on without showing the change and asking first (on a terminal)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var index uint64
		if len(args) == 1 {
			index, _ = parseIndex(args[0]) // checked by Args
		}
		var tag string
		var point uint64
		toPoint := cmd.Flags().Changed("to")
		if toPoint {
			var err error
			if tag, point, err = parsePoint(to); err != nil {
				return o.usage(cmd, fmt.Errorf("--to %q: %w", to, err))
			}
		}
		if dryRun {
			if async {
				return o.usage(cmd, errors.New("--dry-run applies nothing: --async means nothing with it"))
			}
			return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
				return o.rollbackDryRun(ctx, c, index, toPoint, tag, point)
			})
		}
		mode := sidecarpb.SetMode_SET_MODE_SYNC
		if async {
			mode = sidecarpb.SetMode_SET_MODE_ASYNC
		}
		if toPoint {
			if !yes && !o.json() && isTerminal(cmd.InOrStdin()) {
				err := o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
					return o.rollbackDryRun(ctx, c, 0, true, tag, point)
				})
				if err != nil {
					return err
				}
				if !o.confirm(cmd.InOrStdin(), "Roll back every change above? [y/N] ") {
					fmt.Fprintln(o.stderr, "gnmi-sidecar: rollback: not confirmed; nothing was journaled")
					return &exitError{code: exitFailed, err: errors.New("rollback: not confirmed")}
				}
			}
			return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
				return o.rollbackTo(ctx, c, tag, point, mode, comment)
			})
		}
		return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
			r, _, err := client.Do(ctx, c, "rollback", &gpb.SetRequest{},
				&sidecarpb.Request{Mode: mode, Rollback: &sidecarpb.Rollback{Index: index}, Comment: comment})
			if err != nil {
				return failed("rollback", err) // the sidecar's message names the proposal
			}
			v := responseView(r)
			if o.json() {
				return o.printJSON(v)
			}
			if v.Apply == "COMPLETE" {
				_, err = fmt.Fprintf(o.stdout, "rolled back proposal %d\n", v.Index)
			} else {
				_, err = fmt.Fprintf(o.stdout, "rolled back proposal %d (rollback commit %s, apply %s)\n", v.Index, v.Commit, v.Apply)
			}
			return err
		})
	}
	return cmd
}

// --- resolve ---

// ResolveOutput is what `gnmi-sidecar resolve ...` prints in JSON.
type ResolveOutput struct {
	Action         string   `json:"action"`
	Settled        uint64   `json:"settled"`
	StillOutOfSync []string `json:"still_out_of_sync"`
	Proposal       uint64   `json:"proposal,omitempty"`
}

func newResolveCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &ops{stdout: stdout, stderr: stderr}
	cmd := o.group(&cobra.Command{
		Use:   "resolve",
		Short: "Settle paths the device is out of sync or drifted for: retry, skip, adopt or revert",
		Long: `resolve settles the paths "gnmi-sidecar status" lists as out of sync: values
of a rollback, a commit-confirmed revert or a re-push that the device refused
for good. The journal records them as applied; the device may hold
something else there.

  retry [PATH...]   push the journal's values again (all out-of-sync paths, or
                    those at or under PATH); the ones the device takes are
                    settled, the others stay out of sync with its new answer
  skip [PATH...]    give up on them: the device's current values there are
                    read back and recorded as applied (a journal proposal
                    authored by you, sent to no device)
  adopt PATH...     the same for any PATH: make the device's current values
                    the journal's
  revert PATH...|--all
                    put the journal's values back on the device at PATH, or
                    at every path "gnmi-sidecar drift" lists: drift under
                    --drift-policy report (values the device refuses go out
                    of sync)

--dry-run prints what it would do, path by path, and does nothing.

Each is recorded in the journal with who asked (status lists the newest);
skip and adopt also as a proposal naming its author (journal show).
Exit code 1 when a retry leaves paths out of sync.

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	o.cfg.addFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().Bool("dry-run", false, "print what the resolve would do; journal and push nothing")
	action := func(use, short string, a sidecarpb.Resolve_Action, args cobra.PositionalArgs) *cobra.Command {
		c := o.command(&cobra.Command{Use: use, Short: short, Long: short + "\n\nExit codes: gnmi-sidecar help exit-codes."})
		c.Args = o.args(args)
		c.RunE = func(cmd *cobra.Command, paths []string) error {
			name := strings.Fields(use)[0]
			if dry, _ := cmd.Flags().GetBool("dry-run"); dry {
				all, _ := cmd.Flags().GetBool("all")
				return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
					return o.resolveDryRun(ctx, c, name, paths, all)
				})
			}
			return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
				if all, _ := cmd.Flags().GetBool("all"); all {
					d, err := fetchDrift(ctx, c)
					if err != nil {
						return failed("resolve "+name+": list the drifted paths", err)
					}
					for _, p := range d.Drift {
						paths = append(paths, p.Path)
					}
					if len(paths) == 0 {
						_, err := fmt.Fprintln(o.stdout, "nothing has drifted: nothing to revert")
						return err
					}
				}
				r, err := client.Resolve(ctx, c, a, paths)
				if err != nil {
					return failed("resolve "+name, err)
				}
				out := ResolveOutput{Action: name, Settled: r.GetSettled(), StillOutOfSync: r.GetStillOutOfSync(), Proposal: r.GetProposal()}
				if out.StillOutOfSync == nil {
					out.StillOutOfSync = []string{}
				}
				if o.json() {
					err = o.printJSON(out)
				} else {
					err = printResolve(o.stdout, out)
				}
				if err == nil && len(out.StillOutOfSync) > 0 {
					err = &exitError{code: exitFailed, err: fmt.Errorf("resolve %s: %d paths still out of sync", name, len(out.StillOutOfSync))}
				}
				return err
			})
		}
		return c
	}
	revert := action("revert PATH...|--all", "Put the journal's values back on the device where it drifted", sidecarpb.Resolve_ACTION_REVERT,
		func(cmd *cobra.Command, args []string) error {
			all, _ := cmd.Flags().GetBool("all")
			if all == (len(args) > 0) {
				return errors.New("name the paths to revert, or --all for every drifted path (not both)")
			}
			return nil
		})
	revert.Flags().Bool("all", false, "revert every path gnmi-sidecar drift lists")
	cmd.AddCommand(
		revert,
		action("retry [PATH...]", "Push the journal's values of the out-of-sync paths to the device again", sidecarpb.Resolve_ACTION_RETRY, cobra.ArbitraryArgs),
		action("skip [PATH...]", "Record the device's current values of the out-of-sync paths as applied", sidecarpb.Resolve_ACTION_SKIP, cobra.ArbitraryArgs),
		action("adopt PATH...", "Record the device's current values at PATH as applied", sidecarpb.Resolve_ACTION_ADOPT, cobra.MinimumNArgs(1)),
	)
	return cmd
}

func printResolve(w io.Writer, r ResolveOutput) error {
	s := fmt.Sprintf("%s: %d out-of-sync paths settled", r.Action, r.Settled)
	if r.Action == "revert" {
		s = fmt.Sprintf("revert: the journal's values are back on the device at %d paths", r.Settled)
	}
	if r.Proposal != 0 {
		s += fmt.Sprintf(", the device's values recorded as proposal %d", r.Proposal)
	}
	if _, err := fmt.Fprintln(w, s); err != nil {
		return err
	}
	for _, p := range r.StillOutOfSync {
		if _, err := fmt.Fprintf(w, "still out of sync: %s\n", p); err != nil {
			return err
		}
	}
	return nil
}

// --- commit ---

// CommitResult is what `gnmi-sidecar commit ...` prints in JSON.
type CommitResult struct {
	ID     string `json:"id"`
	Action string `json:"action"` // confirm, cancel or extend
	// RollbackDuration is extend's new duration, in nanoseconds.
	RollbackDuration int64 `json:"rollback_duration,omitempty"`
	// Response is the sidecar's Response extension, if the answer had one.
	Response *ResponseView `json:"response,omitempty"`
}

func newCommitCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &ops{stdout: stdout, stderr: stderr}
	cmd := o.group(&cobra.Command{
		Use:   "commit",
		Short: "Confirm, cancel or extend the outstanding commit-confirmed",
		Long: `commit acts on the outstanding commit-confirmed change (the standard
OpenConfig commit-confirmed gNMI extension) by its client-chosen ID: confirm
keeps the change, cancel rolls it back now, extend sets how long from now
it may stay unconfirmed. "gnmi-sidecar status" shows the outstanding one.

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	o.cfg.addFlags(cmd.PersistentFlags())

	idArg := func(_ *cobra.Command, args []string) error {
		if len(args) > 0 && args[0] == "" {
			return errors.New("the commit id must not be empty")
		}
		return nil
	}
	action := func(use, short, long, done string, nargs int, build func(id string, args []string) (*gnmi_ext.Commit, *CommitResult, error)) *cobra.Command {
		c := o.command(&cobra.Command{Use: use, Short: short, Long: long + "\n\nExit codes: gnmi-sidecar help exit-codes."})
		c.Args = o.args(cobra.MatchAll(cobra.ExactArgs(nargs), idArg))
		c.RunE = func(cmd *cobra.Command, args []string) error {
			commit, res, err := build(args[0], args[1:])
			if err != nil {
				return o.usage(cmd, err)
			}
			if dry, _ := cmd.Flags().GetBool("dry-run"); dry {
				return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
					return o.cancelDryRun(ctx, c, res.ID)
				})
			}
			return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
				r, err := commitSet(ctx, c, commit)
				if err != nil {
					return failed(fmt.Sprintf("%s commit %q", res.Action, res.ID), err)
				}
				res.Response = r
				if o.json() {
					return o.printJSON(res)
				}
				_, err = fmt.Fprintln(o.stdout, done+describeCommitResponse(res))
				return err
			})
		}
		return c
	}

	cancel := action("cancel ID", "Cancel the outstanding commit: its change is rolled back now",
		`cancel cancels the outstanding commit-confirmed ID: its change is rolled
back, and the command returns once the rollback is applied (allow for it
with --timeout). --dry-run prints what the rollback would change, and
journals and applies nothing.`,
		"cancelled commit", 1,
		func(id string, _ []string) (*gnmi_ext.Commit, *CommitResult, error) {
			return &gnmi_ext.Commit{Id: id, Action: &gnmi_ext.Commit_Cancel{Cancel: &gnmi_ext.CommitCancel{}}},
				&CommitResult{ID: id, Action: "cancel"}, nil
		})
	cancel.Flags().Bool("dry-run", false, "print what cancelling would roll back; journal and apply nothing")
	cmd.AddCommand(
		action("confirm ID", "Confirm the outstanding commit: its change stays",
			"confirm confirms the outstanding commit-confirmed ID: its change stays.",
			"confirmed commit", 1,
			func(id string, _ []string) (*gnmi_ext.Commit, *CommitResult, error) {
				return &gnmi_ext.Commit{Id: id, Action: &gnmi_ext.Commit_Confirm{Confirm: &gnmi_ext.CommitConfirm{}}},
					&CommitResult{ID: id, Action: "confirm"}, nil
			}),
		cancel,
		action("extend ID DURATION", "Set how long from now the outstanding commit may stay unconfirmed",
			`extend sets the rollback duration of the outstanding commit-confirmed ID:
unless confirmed within DURATION from now (e.g. 10m, 1h30m), its change is
rolled back.`,
			"extended commit", 2,
			func(id string, args []string) (*gnmi_ext.Commit, *CommitResult, error) {
				d, err := time.ParseDuration(args[0])
				if err != nil {
					return nil, nil, fmt.Errorf("invalid duration %q: want e.g. 10m or 1h30m", args[0])
				}
				if d <= 0 {
					return nil, nil, fmt.Errorf("invalid duration %q: must be positive", args[0])
				}
				return &gnmi_ext.Commit{Id: id, Action: &gnmi_ext.Commit_SetRollbackDuration{
						SetRollbackDuration: &gnmi_ext.CommitSetRollbackDuration{RollbackDuration: durationpb.New(d)}}},
					&CommitResult{ID: id, Action: "extend", RollbackDuration: int64(d)}, nil
			}),
	)
	return cmd
}

// describeCommitResponse completes the text line of a commit action.
func describeCommitResponse(r *CommitResult) string {
	s := fmt.Sprintf(" %q", r.ID)
	if r.Action == "extend" {
		s += fmt.Sprintf(": rolled back in %v unless confirmed", time.Duration(r.RollbackDuration))
	}
	v := r.Response
	switch {
	case v == nil || v.Index == 0:
	case v.Phase == "ROLLBACK" && v.Apply == "COMPLETE":
		s += fmt.Sprintf(": rolled back proposal %d", v.Index)
	case v.Phase == "ROLLBACK":
		s += fmt.Sprintf(": rolling back proposal %d (rollback commit %s, apply %s)", v.Index, v.Commit, v.Apply)
	default:
		s += fmt.Sprintf(" (proposal %d)", v.Index)
	}
	return s
}

// --- status ---

func newStatusCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &ops{stdout: stdout, stderr: stderr}
	cmd := o.command(&cobra.Command{
		Use:   "status",
		Short: "Show the sidecar's configuration state, device state and outstanding commit",
		Long: `status prints, as "key: value" lines under headings, the sidecar's
configuration state (committed and applied indexes, re-push status, the
journal's range), its device state (connection, term, last re-push, last
error; how the device's configuration is read, read-method, and why it
cannot be, read-error) and the outstanding commit-confirmed, if any. Keys are
the leaf names of docs/introspection.md.

It exits 3 when the device's configuration cannot be read (the sidecar tried
every kind of read; read-error says what the device answered to each).

Exit codes: gnmi-sidecar help exit-codes.`,
	})
	cmd.Args = o.args(cobra.NoArgs)
	o.cfg.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return o.run(cmd, func(ctx context.Context, c gpb.GNMIClient) error {
			v, err := fetchStatus(ctx, c)
			if err != nil {
				return failed("read the sidecar's status", err)
			}
			if o.json() {
				if err := o.printJSON(v); err != nil {
					return err
				}
				return statusUnreadable(v)
			}
			if err := printStatus(o.stdout, v, time.Now()); err != nil {
				return err
			}
			return statusUnreadable(v)
		})
	}
	return cmd
}

// statusUnreadable ends status with exit code 3 when the device's
// configuration cannot be read (nil when it can, or nothing is known).
func statusUnreadable(v *StatusView) error {
	if err := v.Device.unreadable(); err != nil {
		return &exitError{code: exitUnreachable, err: fmt.Errorf("status: %w", err)}
	}
	return nil
}

// optBoolPtr is "true" or "false", or "" (left out) for nil.
func optBoolPtr(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

// section prints a titled, indented table of rows under header; nothing
// when there are no rows.
func section(w io.Writer, title string, header []string, rows [][]string) error {
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\n"+title)
	tw := newTable(w)
	for _, r := range append([][]string{header}, rows...) {
		fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func printStatus(w io.Writer, v *StatusView, now time.Time) error {
	c, d := v.Configuration, v.Device
	fmt.Fprintf(w, "Status: %s\n\n", v.Summary)
	fmt.Fprintln(w, "Configuration (*-index: the newest change in effect; *-proposal: the newest proposal up to which all are decided)")
	first, last := strconv.FormatUint(c.FirstIndex, 10), strconv.FormatUint(c.LastIndex, 10)
	if c.LastIndex < c.FirstIndex || c.LastIndex == 0 {
		first, last = "(empty journal)", "(empty journal)"
	}
	bootTime := ""
	if c.AppliedTarget != 0 {
		bootTime = time.Unix(0, int64(c.AppliedTarget)).UTC().Format(time.RFC3339Nano)
	}
	if err := keyValues(w, "  ",
		"committed-index", strconv.FormatUint(c.CommittedIndex, 10),
		"committed-proposal", strconv.FormatUint(c.CommittedProposal, 10),
		"applied-index", strconv.FormatUint(c.AppliedIndex, 10),
		"applied-proposal", strconv.FormatUint(c.AppliedProposal, 10),
		"applied-term", strconv.FormatUint(c.AppliedTerm, 10),
		"applied-device-boot-time", bootTime,
		"repush-status", c.Status,
		"first-index", first,
		"last-index", last,
		"rolling-back", optUintText(c.RollingBack),
		"history-floor", optTime(c.HistoryFloor),
		"out-of-sync", strconv.FormatUint(c.OutOfSync, 10),
		"baseline-index", optUintText(c.BaselineIndex),
	); err != nil {
		return err
	}
	var rows [][]string
	for _, o := range v.OutOfSync {
		val := "(deleted)"
		if !o.Deleted && o.Value != nil {
			val = truncate(o.Value.Text(), maxValueWidth)
		}
		rows = append(rows, []string{o.Path, val, o.Cause, optUintText(o.Proposal),
			truncate(strings.TrimSpace(o.ErrorCode+": "+o.ErrorMessage), maxValueWidth), optTime(o.Since)})
	}
	if err := section(w, "Out of sync (the device refused these values; see gnmi-sidecar resolve)",
		[]string{"PATH", "JOURNAL VALUE", "CAUSE", "PROPOSAL", "DEVICE ERROR", "SINCE"}, rows); err != nil {
		return err
	}
	rows = nil
	for _, r := range v.Resolutions {
		rows = append(rows, []string{strconv.FormatUint(r.Seq, 10), optTime(r.Time), r.Author, r.Action,
			strconv.Itoa(len(r.Settled)), strconv.Itoa(len(r.StillOutOfSync)), optUintText(r.Proposal)})
	}
	if err := section(w, "Resolutions (the newest, oldest first)",
		[]string{"SEQ", "TIME", "AUTHOR", "ACTION", "SETTLED", "STILL OUT OF SYNC", "PROPOSAL"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nDevice")
	dur, onDevice := "", ""
	if d.LastRepushDuration != nil {
		dur = time.Duration(*d.LastRepushDuration).String()
	}
	if d.LastRepushDeviceDuration != nil {
		onDevice = time.Duration(*d.LastRepushDeviceDuration).String()
	}
	if err := keyValues(w, "  ",
		"address", d.Address,
		"connected", strconv.FormatBool(d.Connected),
		"term", optUintText(d.Term),
		"repushing", strconv.FormatBool(d.Repushing),
		"fenced", strconv.FormatBool(d.Fenced),
		"fenced-by", d.FencedBy,
		"retrying", retryingText(d),
		"last-repush-time", optTime(d.LastRepushTime),
		"last-repush-values", optUintText(d.LastRepushValues),
		"last-repush-duration", dur,
		"last-repush-device-duration", onDevice,
		"last-error", d.LastError,
		"drifted", optUintText(v.Drifted),
		"read-method", d.ReadMethod,
		"readable", optBoolPtr(d.Readable),
		"read-error", d.ReadError,
	); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nCommit-confirmed")
	cc := v.CommitConfirm
	if cc == nil {
		_, err := fmt.Fprintln(w, "  none outstanding")
		return err
	}
	deadline := optTime(cc.Deadline)
	if !cc.Deadline.IsZero() && !cc.Cancelled {
		if left := cc.Deadline.Sub(now).Round(time.Second); left > 0 {
			deadline += fmt.Sprintf(" (in %v)", left)
		} else {
			deadline += " (passed)"
		}
	}
	return keyValues(w, "  ",
		"id", cc.ID,
		"proposal", strconv.FormatUint(cc.Proposal, 10),
		"started", optTime(cc.Started),
		"deadline", deadline,
		"cancelled", strconv.FormatBool(cc.Cancelled),
		"author", cc.Author,
		"cancelled-by", cc.CancelledBy,
		"extended-by", cc.ExtendedBy,
		"extended", optTime(cc.Extended),
	)
}

// isTerminal reports whether in is a terminal: a person may be asked. An
// input that says whether it is one (IsTerminal) is taken at its word.
func isTerminal(in io.Reader) bool {
	if t, ok := in.(interface{ IsTerminal() bool }); ok {
		return t.IsTerminal()
	}
	f, ok := in.(*os.File)
	return ok && terminal.IsTerminal(int(f.Fd()))
}

// confirm asks question on stderr and reads the answer from in: true for
// y or yes.
func (o *ops) confirm(in io.Reader, question string) bool {
	fmt.Fprint(o.stderr, question)
	answer, _ := bufio.NewReader(in).ReadString('\n')
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}

// cancelDryRun prints what cancelling the outstanding commit-confirmed id
// would change: its proposal's change undone, leaf by leaf (what the
// journal records the change wrote, and what each path held before it).
func (o *ops) cancelDryRun(ctx context.Context, c gpb.GNMIClient, id string) error {
	what := "commit cancel --dry-run"
	v, err := fetchStatus(ctx, c)
	if err != nil {
		return failed(what, err)
	}
	cc := v.CommitConfirm
	if cc == nil || cc.ID != id {
		return &exitError{code: exitPrecondition, err: fmt.Errorf("%s: no commit-confirmed %q is outstanding (gnmi-sidecar status)", what, id)}
	}
	d, err := fetchProposal(ctx, c, cc.Proposal)
	if err != nil {
		return failed(what, err)
	}
	res := RollbackDryRunResult{DryRun: true, Index: cc.Proposal, Diff: changesDiff(d.Changes, true)}
	res.Unchanged = len(res.Diff) == 0
	if o.json() {
		return o.printJSON(res)
	}
	fmt.Fprintf(o.stdout, "cancelling commit %q would roll back proposal %d and change (dry run: nothing was journaled):\n", id, cc.Proposal)
	return printLeafChanges(o.stdout, res.Diff)
}

// ResolveDryRun is what `resolve ... --dry-run -o json` prints: the paths
// the resolve would settle, with the value it would give each (the
// journal's, for retry and revert) or leave (the device's, for skip and
// adopt).
type ResolveDryRun struct {
	DryRun bool            `json:"dry_run"`
	Action string          `json:"action"`
	Paths  []ResolveTarget `json:"paths"`
}

// ResolveTarget is one path of a resolve dry run.
type ResolveTarget struct {
	Path    string `json:"path"`
	Journal *Value `json:"journal_value,omitempty"`
	Device  *Value `json:"device_value,omitempty"`
	Deleted bool   `json:"journal_deleted,omitempty"`
}

// resolveDryRun prints what resolve action would do at paths (all: every
// drifted path, for revert), from the sidecar's status and drift: nothing
// is journaled or pushed.
func (o *ops) resolveDryRun(ctx context.Context, c gpb.GNMIClient, action string, paths []string, all bool) error {
	what := "resolve " + action + " --dry-run"
	scopes := make([]*gpb.Path, 0, len(paths))
	for _, p := range paths {
		gp, err := ygot.StringToStructuredPath(p)
		if err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("%s: path %q: %w", what, p, err)}
		}
		scopes = append(scopes, gp)
	}
	// At or under one of the paths, as the sidecar selects them
	// (journal.SelectOutOfSync).
	under := func(p string) bool {
		gp, err := ygot.StringToStructuredPath(p)
		return len(scopes) == 0 || err == nil && slices.ContainsFunc(scopes, func(s *gpb.Path) bool { return journal.IsUnder(gp, s) })
	}
	res := ResolveDryRun{DryRun: true, Action: action, Paths: []ResolveTarget{}}
	var verb string
	switch action {
	case "retry", "skip":
		v, err := fetchStatus(ctx, c)
		if err != nil {
			return failed(what, err)
		}
		for _, rec := range v.OutOfSync {
			if under(rec.Path) {
				res.Paths = append(res.Paths, ResolveTarget{Path: rec.Path, Journal: rec.Value, Deleted: rec.Deleted})
			}
		}
		verb = "would push the journal's value again at"
		if action == "skip" {
			verb = "would record the device's current value as applied at"
		}
	case "revert":
		d, err := fetchDrift(ctx, c)
		if err != nil {
			return failed(what, err)
		}
		for _, p := range d.Drift {
			if all || len(paths) > 0 && under(p.Path) {
				res.Paths = append(res.Paths, ResolveTarget{Path: p.Path, Journal: p.JournalValue, Device: p.DeviceValue, Deleted: p.JournalDeleted})
			}
		}
		verb = "would put the journal's value back at"
	default: // adopt
		for _, p := range paths {
			res.Paths = append(res.Paths, ResolveTarget{Path: p})
		}
		verb = "would read the device's configuration and record it as applied at"
	}
	if o.json() {
		return o.printJSON(res)
	}
	if len(res.Paths) == 0 {
		_, err := fmt.Fprintf(o.stdout, "%s: nothing to do (dry run: nothing was journaled)\n", action)
		return err
	}
	fmt.Fprintf(o.stdout, "%s %s (dry run: nothing was journaled or pushed):\n", action, verb)
	for _, t := range res.Paths {
		line := "  " + t.Path
		switch {
		case t.Deleted:
			line += ": (deleted)"
		case t.Journal != nil && action != "skip":
			line += ": " + t.Journal.Text()
		}
		if t.Device != nil {
			line += "  (the device holds " + t.Device.Text() + ")"
		}
		fmt.Fprintln(o.stdout, line)
	}
	return nil
}
