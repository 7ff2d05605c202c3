package testbed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ygot"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// ErrRunning is returned by Start when the device is already serving.
var ErrRunning = errors.New("testbed: device is already running")

// ErrStateFile wraps every failure to read the persistent state file, so a
// caller can tell a corrupt startup configuration from a network error.
var ErrStateFile = errors.New("testbed: cannot load state file")

// Options configures a Device.
type Options struct {
	// Persistent keeps the configuration across Stop/Start, like a device
	// with a startup configuration. With StateFile set, it is also saved to
	// that file after every successful Set and loaded by Start, so it
	// survives the process. Without Persistent, Start begins empty.
	Persistent bool
	// StateFile is where a persistent device keeps its configuration
	// (RFC 7951 JSON). Empty means in memory only.
	StateFile string
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Target is the name reported in Subscribe notification prefixes when
	// the client sent none.
	Target string
	// RefuseOnChange makes Subscribe refuse STREAM subscriptions in mode
	// ON_CHANGE (and TARGET_DEFINED) with Unimplemented, like a device
	// that streams only SAMPLE; ONCE, POLL and SAMPLE work.
	RefuseOnChange bool
	// NoUnionReplace makes Set refuse any union_replace operation with
	// Unimplemented, like a device older than gNMI 0.10.
	NoUnionReplace bool
	// EchoExtensions makes every RPC answer with the RegisteredExtensions
	// its request carried, unchanged (Subscribe: with each
	// sync_response), so that the relay of response extensions can be
	// tested. Off, they are ignored, as by a device that knows none.
	EchoExtensions bool
	// RequireTarget, if set, is the one target the device serves: a Get,
	// Set or Subscribe whose prefix names another target, or none, is
	// refused with NotFound, as by a server of several targets (SONiC's
	// routes on OC-YANG and CONFIG_DB).
	RequireTarget string
	// RefuseGetConfig makes Get refuse the data type CONFIG with
	// Unimplemented ("unsupported request type: CONFIG"), as gnxi's
	// gnmi_target does; ALL, STATE and OPERATIONAL work.
	RefuseGetConfig bool
	// RefuseGet makes every Get fail with Unimplemented, like a device
	// read only with Subscribe.
	RefuseGet bool
	// RefuseEncodings are encodings that Get and Subscribe refuse, each
	// with its code (Unimplemented, as gnxi's gnmi_target refuses PROTO,
	// or InvalidArgument) and the message "unsupported encoding: NAME";
	// Capabilities does not list them.
	RefuseEncodings map[gpb.Encoding]codes.Code
	// Users, if set, are the accounts (username → password) the device
	// accepts: every RPC must carry matching username and password
	// metadata, else it is refused with Unauthenticated.
	Users map[string]string
}

// ElectionID is a gNMI MasterArbitration election id (a uint128).
type ElectionID struct{ High, Low uint64 }

func (e ElectionID) less(o ElectionID) bool {
	return e.High < o.High || (e.High == o.High && e.Low < o.Low)
}

func (e ElectionID) String() string {
	if e.High == 0 {
		return fmt.Sprintf("%d", e.Low)
	}
	return fmt.Sprintf("{high:%d low:%d}", e.High, e.Low)
}

// Device is a simulated gNMI target: an OpenConfig configuration tree served
// over gRPC with Capabilities, Get, Set and Subscribe, MasterArbitration,
// restart and fault injection. All methods are safe for concurrent use.
type Device struct {
	opts  Options
	log   *slog.Logger
	model model
	// fast is the fast path of Sets of scalar leaves in list entries.
	fast *fastSet

	// lifeMu serializes Start and Stop.
	lifeMu sync.Mutex
	// setSem (capacity 1) serializes Sets, so they apply one at a time in
	// arrival order; a Set waits for it with its context.
	setSem chan struct{}

	// tree guards the contents of root: a Set that writes only entries of
	// top-level lists puts new entries into those lists' maps in place
	// under it (write), so its cost does not grow with the size of the
	// lists; other Sets install a new root. Nothing in the tree is
	// modified otherwise: a Set works on copies. Readers of a few entries
	// walk the tree under it (read, see readTree); readers of whole lists
	// copy those maps under it and walk the copy without it (view), so a
	// large Get does not hold up Sets.
	tree sync.RWMutex

	mu       sync.Mutex
	running  bool
	addr     string
	srv      *grpc.Server
	lis      *trackingListener
	served   chan struct{} // closed when Serve returns
	root     ygot.ValidatedGoStruct
	bootTime time.Time
	election *ElectionID
	setCount int64
	watchers map[*watcher]struct{}
	faults   faults
	// last holds the last request of each RPC (LastRequest); requests
	// counts them (Requests).
	last     map[string]Request
	requests map[string]int64
	// sets is the Set log (SetLog).
	sets setLog
}

type faults struct {
	rejectN    int
	rejectCode codes.Code
	// refuse holds paths at or under which every Set that writes or
	// deletes is refused, with their codes.
	refuse []refusedPath
	delay  time.Duration
	// perUpdate is added to delay once per operation of the Set.
	perUpdate time.Duration
	hangNext  bool
	// atPath are the faults armed for the Sets that touch a path
	// (ArmSetFault), in the order they were armed.
	atPath []*pathFault
}

// New returns a stopped device; call Start to serve it.
func New(opts Options) (*Device, error) {
	m, err := newExampleOCModel()
	if err != nil {
		return nil, fmt.Errorf("testbed: loading schema: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Target == "" {
		opts.Target = "testbed"
	}
	return &Device{opts: opts, log: log, model: m, fast: newFastSet(m.RootSchema(), m.NewRoot()), setSem: make(chan struct{}, 1),
		watchers: map[*watcher]struct{}{}, last: map[string]Request{}, requests: map[string]int64{}}, nil
}

// Start serves the device on addr ("127.0.0.1:0" picks a free port). An
// empty addr reuses the address of the previous run, so Stop+Start is a
// restart on the same address. A persistent device with a StateFile loads
// it; a corrupt file fails Start with an error wrapping ErrStateFile that
// names the file.
func (d *Device) Start(ctx context.Context, addr string) error {
	d.lifeMu.Lock()
	defer d.lifeMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return ErrRunning
	}
	if addr == "" {
		addr = d.addr
	}
	if addr == "" {
		return errors.New("testbed: Start needs an address the first time")
	}

	root, err := d.startupConfig()
	if err != nil {
		return err
	}
	boot := time.Now()
	if !boot.After(d.bootTime) {
		boot = d.bootTime.Add(time.Nanosecond)
	}
	d.model.SetBootTime(root, uint64(boot.UnixNano()))

	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("testbed: listen on %s: %w", addr, err)
	}
	d.lis = newTrackingListener(l)
	d.addr = l.Addr().String()
	d.root = root
	d.bootTime = boot
	d.election = nil
	d.srv = grpc.NewServer(grpc.WaitForHandlers(true),
		grpc.ChainUnaryInterceptor(d.unaryGate), grpc.ChainStreamInterceptor(d.streamGate))
	gpb.RegisterGNMIServer(d.srv, &gnmiServer{d: d})
	d.running = true
	served := make(chan struct{})
	d.served = served
	srv, lis := d.srv, d.lis
	go func() {
		defer close(served)
		if err := srv.Serve(lis); err != nil {
			d.log.Error("gNMI server stopped", "addr", lis.Addr().String(), "err", err)
		}
	}()
	d.log.Info("device started", "addr", d.addr, "persistent", d.opts.Persistent, "boot_time", boot.UnixNano())
	return nil
}

// startupConfig is the configuration a starting device comes up with.
func (d *Device) startupConfig() (ygot.ValidatedGoStruct, error) {
	if !d.opts.Persistent {
		return d.model.NewRoot(), nil
	}
	if d.opts.StateFile == "" {
		if d.root == nil {
			return d.model.NewRoot(), nil
		}
		// A copy of the root struct: Start writes the boot time into it.
		cp := reflect.New(reflect.TypeOf(d.root).Elem())
		cp.Elem().Set(reflect.ValueOf(d.root).Elem())
		return cp.Interface().(ygot.ValidatedGoStruct), nil
	}
	data, err := os.ReadFile(d.opts.StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return d.model.NewRoot(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrStateFile, d.opts.StateFile, err)
	}
	root, err := d.model.UnmarshalRoot(data)
	if err != nil {
		return nil, fmt.Errorf("%w %s: not a valid configuration: %w", ErrStateFile, d.opts.StateFile, err)
	}
	if err := validateTree(d.model.RootSchema(), root); err != nil {
		return nil, fmt.Errorf("%w %s: configuration fails schema validation: %w", ErrStateFile, d.opts.StateFile, err)
	}
	return root, nil
}

// Stop closes the listener and every client connection, ends all RPCs and
// waits for their handlers. A non-persistent device forgets its
// configuration. Stop on a stopped device does nothing.
func (d *Device) Stop() {
	d.lifeMu.Lock()
	defer d.lifeMu.Unlock()
	d.mu.Lock()
	if !d.running {
		d.mu.Unlock()
		return
	}
	srv, served := d.srv, d.served
	d.running = false
	d.mu.Unlock()

	// Stop closes every connection, which ends hanging Sets and streams,
	// and waits for all handlers (WaitForHandlers), so no Set commits after
	// this.
	srv.Stop()
	<-served

	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.opts.Persistent {
		d.root = nil
	}
	d.srv, d.lis = nil, nil
	d.log.Info("device stopped", "addr", d.addr)
}

// Running reports whether the device is serving.
func (d *Device) Running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.running
}

// Addr is the address the device serves on (or last served on).
func (d *Device) Addr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addr
}

// BootTime is when the device last started; /system/state/boot-time holds
// it in nanoseconds.
func (d *Device) BootTime() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bootTime
}

// SetCount is the number of Set RPCs received since New, including rejected
// ones.
func (d *Device) SetCount() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.setCount
}

// ElectionID returns the highest MasterArbitration election id seen since
// the device last started, and false if no Set carried one.
func (d *Device) ElectionID() (ElectionID, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.election == nil {
		return ElectionID{}, false
	}
	return *d.election, true
}

// RejectNextSets makes the next n Sets fail with code (and change nothing).
func (d *Device) RejectNextSets(n int, code codes.Code) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.rejectN, d.faults.rejectCode = n, code
	d.log.Info("fault armed: reject sets", "n", n, "code", code.String())
}

// refusedPath is a path the device refuses to touch (RefuseSetsAt).
type refusedPath struct {
	path *gpb.Path
	code codes.Code
}

// RefuseSetsAt makes the device refuse, with code and until ClearFaults,
// every Set with an operation at or under path (a device that rejects one
// value, whatever else the Set carries).
func (d *Device) RefuseSetsAt(path string, code codes.Code) error {
	p, err := ygot.StringToStructuredPath(path)
	if err != nil {
		return fmt.Errorf("refuse sets at %q: %w", path, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.refuse = append(d.faults.refuse, refusedPath{path: p, code: code})
	d.log.Info("fault armed: refuse sets at path", "path", path, "code", code.String())
	return nil
}

// SetDelay delays every Set by delay before it is applied (0 turns it off),
// like a device that takes time to commit.
func (d *Device) SetDelay(delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.delay = delay
	d.log.Info("fault armed: set delay", "delay", delay)
}

// SetUpdateDelay delays every Set by delay for each of its operations
// (each delete path, replace, union_replace and update), in addition to
// SetDelay (0 turns it off): a device whose commit costs grow with what a
// Set carries rather than per request, as many real targets' do. A Set of
// n operations then waits SetDelay + n × delay before it is applied.
func (d *Device) SetUpdateDelay(delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.perUpdate = delay
	d.log.Info("fault armed: per-update set delay", "delay", delay)
}

// HangNextSet makes the next Set block, unapplied, until its RPC ends (the
// client gives up or the connection drops).
func (d *Device) HangNextSet() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.hangNext = true
	d.log.Info("fault armed: hang next set")
}

// SetFault is a fault for the Sets that touch one path (ArmSetFault), as a
// real device answers one value, or one part of its configuration,
// differently from the rest.
type SetFault struct {
	// Path is where the fault lies: it meets a Set with an operation at or
	// under Path, or a replace or update above it whose JSON value holds
	// something at Path. "/" meets every Set with an operation.
	Path string
	// Times is how many matching Sets the fault meets before it is gone;
	// 0: every one, until ClearFaults.
	Times int
	// Delay holds a matching Set this long before it is applied. A Set
	// whose context ends meanwhile is not applied and is answered with
	// its context's error, as a real device aborts the commit of a
	// cancelled RPC.
	Delay time.Duration
	// Hang holds a matching Set, unapplied, until its RPC's context ends
	// (the client cancels, its deadline passes, the connection drops);
	// it is answered with its context's error.
	Hang bool
	// Code, unless OK, refuses a matching Set (after Delay) with this
	// code and the message "<Path>: refused by injected fault (<code>)";
	// nothing is applied.
	Code codes.Code
	// Details adds to the refusal a google.rpc.BadRequest whose
	// FieldViolation names Path, as devices that say which value they
	// refuse do.
	Details bool
	// AnswerLost, unless OK, applies a matching Set and then answers it
	// with this code instead of OK: an answer lost on its way back (a
	// timeout, a connection that broke after the commit), which leaves
	// its client in doubt.
	AnswerLost codes.Code
}

// pathFault is an armed SetFault.
type pathFault struct {
	SetFault
	path *gpb.Path
	left int // Sets it still meets; 0 with Times 0: no limit
}

// ArmSetFault arms f. Several faults may be armed, also at one path: a Set
// meets every one that matches it (each counts it against its Times): it
// waits for their delays added up, then hangs if one hangs, then is
// refused with the code of the first armed refusal among them. The faults
// act while the Set holds the device's commit lock, so the Sets after it
// wait, as on a device busy committing. The Set log (SetLog) names each
// fault that met a Set. Faults of a path and those of every Set
// (SetDelay, HangNextSet, RejectNextSets) act independently, the latter
// first.
func (d *Device) ArmSetFault(f SetFault) error {
	if f.Times < 0 || f.Delay < 0 {
		return fmt.Errorf("set fault at %q: negative times or delay", f.Path)
	}
	if f.Delay == 0 && !f.Hang && f.Code == codes.OK && f.AnswerLost == codes.OK {
		return fmt.Errorf("set fault at %q: no delay, no hang, no code and no lost answer: it would do nothing", f.Path)
	}
	p := &gpb.Path{}
	if f.Path != "/" {
		var err error
		if p, err = ygot.StringToStructuredPath(f.Path); err != nil {
			return fmt.Errorf("set fault at %q: %w", f.Path, err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults.atPath = append(d.faults.atPath, &pathFault{SetFault: f, path: p, left: f.Times})
	d.log.Info("fault armed: sets at path", "path", f.Path, "times", f.Times, "delay", f.Delay, "hang", f.Hang, "code", f.Code.String(), "details", f.Details)
	return nil
}

// RefuseNextSetsAt refuses the next n Sets that touch path (see SetFault)
// with code; n 0 refuses every one, as RefuseSetsAt.
func (d *Device) RefuseNextSetsAt(path string, code codes.Code, n int) error {
	if code == codes.OK {
		return fmt.Errorf("refuse sets at %q: code OK refuses nothing", path)
	}
	return d.ArmSetFault(SetFault{Path: path, Times: n, Code: code})
}

// HangNextSetAt makes the next Set that touches path (see SetFault) hang,
// unapplied, until its RPC's context ends.
func (d *Device) HangNextSetAt(path string) error {
	return d.ArmSetFault(SetFault{Path: path, Times: 1, Hang: true})
}

// DelayNextSetsAt delays the next n Sets that touch path (see SetFault) by
// delay before they are applied (n 0: every one); a Set whose context
// ends meanwhile is not applied.
func (d *Device) DelayNextSetsAt(path string, delay time.Duration, n int) error {
	if delay <= 0 {
		return fmt.Errorf("delay sets at %q: delay %v, want a positive one", path, delay)
	}
	return d.ArmSetFault(SetFault{Path: path, Times: n, Delay: delay})
}

// ClearFaults disarms every fault.
func (d *Device) ClearFaults() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = faults{}
}

// DropConnections closes every client connection now; the device keeps
// listening and accepts new connections.
func (d *Device) DropConnections() {
	d.mu.Lock()
	lis := d.lis
	d.mu.Unlock()
	if lis != nil {
		n := lis.closeAll()
		d.log.Info("dropped client connections", "count", n)
	}
}

// readTree calls fn with the current tree, which holds still until fn
// returns: fn must not keep it, nor anything in it, afterwards.
func (d *Device) readTree(fn func(root ygot.ValidatedGoStruct) error) error {
	d.tree.RLock()
	defer d.tree.RUnlock()
	return fn(d.current())
}

// readAt calls fn with a tree that holds still while fn reads the data at
// paths (full paths; none: the whole tree): the current tree under the
// tree lock if every path names an entry of a list, else a view of all of
// it (see view), without the lock. (A path that names no entry may end up
// read from the root: a Get of a container the schema compressed away.)
func (d *Device) readAt(paths []*gpb.Path, fn func(root ygot.ValidatedGoStruct) error) error {
	pinpoint := len(paths) > 0
	for _, p := range paths {
		pinpoint = pinpoint && namesEntry(p)
	}
	if pinpoint {
		return d.readTree(fn)
	}
	return fn(d.view(nil))
}

// namesEntry reports whether p goes through a list entry it names with
// concrete keys, and has no wildcards.
func namesEntry(p *gpb.Path) bool {
	if names, keys := wildcards(p); names || keys {
		return false
	}
	for _, e := range p.GetElem() {
		if len(e.GetKey()) > 0 {
			return true
		}
	}
	return false
}

// view returns the current tree as a root that holds still without the
// tree lock: a copy of the root struct, with copies of the maps of the
// top-level lists that paths (full paths; none: all of them) may reach.
// Entries in the tree are never modified (a Set replaces them), so that
// is all that can change under a reader. With paths, the other top-level
// fields (and the root's annotations) are left out (empty); with none,
// the view holds every field of the root.
func (d *Device) view(paths []*gpb.Path) ygot.ValidatedGoStruct {
	d.tree.RLock()
	defer d.tree.RUnlock()
	return viewOf(d.current(), paths)
}

func viewOf(root ygot.ValidatedGoStruct, paths []*gpb.Path) ygot.ValidatedGoStruct {
	src := reflect.ValueOf(root).Elem()
	dst := reflect.New(src.Type())
	if len(paths) == 0 {
		dst.Elem().Set(src)
	}
	for _, f := range rootFieldsOf(src.Type()) {
		m := src.Field(f.index)
		if !f.reachedBy(paths) {
			continue
		}
		if f.typ.Kind() != reflect.Map || m.IsNil() {
			dst.Elem().Field(f.index).Set(m)
			continue
		}
		cp := reflect.MakeMapWithSize(m.Type(), m.Len())
		for it := m.MapRange(); it.Next(); {
			cp.SetMapIndex(it.Key(), it.Value())
		}
		dst.Elem().Field(f.index).Set(cp)
	}
	return dst.Interface().(ygot.ValidatedGoStruct)
}

// current returns the current tree (an empty one before the first Start).
// Reading it without the tree lock is safe only for the Set in progress,
// the only writer.
func (d *Device) current() ygot.ValidatedGoStruct {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.root == nil {
		return d.model.NewRoot()
	}
	return d.root
}

// ConfigJSON returns the running configuration (config and state leaves)
// as RFC 7951 JSON.
func (d *Device) ConfigJSON() ([]byte, error) {
	var s string
	err := d.readAt(nil, func(root ygot.ValidatedGoStruct) (err error) {
		s, err = ygot.EmitJSON(root, &ygot.EmitJSONConfig{Format: ygot.RFC7951, Indent: "  ", RFC7951Config: &ygot.RFC7951JSONConfig{AppendModuleName: true}})
		return err
	})
	return []byte(s), err
}

// ConfigLeaves returns every configuration leaf as gNMI path string →
// value, e.g. "/interfaces/interface[name=eth0]/config/description". State
// leaves (any path through a "state" container, such as boot-time) are left
// out. A list key appears both as the key leaf ("…/name") and in config
// ("…/config/name"), as the schema has both.
func (d *Device) ConfigLeaves() (map[string]*gpb.TypedValue, error) {
	var leaves []leaf
	err := d.readAt(nil, func(root ygot.ValidatedGoStruct) (err error) {
		leaves, err = leavesOf(root, nil, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*gpb.TypedValue, len(leaves))
	for _, l := range leaves {
		if hasElem(l.path, "state") {
			continue
		}
		out[pathString(l.path)] = l.val
	}
	return out, nil
}

// ConfigPaths is ConfigLeaves' keys, sorted.
func (d *Device) ConfigPaths() ([]string, error) {
	m, err := d.ConfigLeaves()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// saveState writes root to the state file atomically: a temporary file in
// the same directory, fsynced, renamed over the old one, directory fsynced.
func (d *Device) saveState(root ygot.ValidatedGoStruct) error {
	s, err := ygot.EmitJSON(root, &ygot.EmitJSONConfig{Format: ygot.RFC7951, Indent: "  ", RFC7951Config: &ygot.RFC7951JSONConfig{AppendModuleName: true}})
	if err != nil {
		return fmt.Errorf("encoding configuration: %w", err)
	}
	dir := filepath.Dir(d.opts.StateFile)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(d.opts.StateFile)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename this is a no-op
	if _, err := tmp.WriteString(s); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), d.opts.StateFile); err != nil {
		return err
	}
	df, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer df.Close()
	return df.Sync()
}
