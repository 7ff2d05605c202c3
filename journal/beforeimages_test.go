package journal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openconfig/gnmi/proto/gnmi"
)

// Unit tests of the before-images from the device (beforeimages.go,
// docs/values.md "Before-images: what the device held"): device reads
// taken in at a change's commit, the read scopes (coverage), unread paths,
// baselines, and History over device reads.

// deviceRead builds a DeviceRead: what the device answered a read of
// scopes with, as path=value pairs (JSON_IETF when the value starts with
// '{' or '[', a string otherwise).
func deviceRead(t testing.TB, scopes []string, kv ...string) *DeviceRead {
	t.Helper()
	r := &DeviceRead{}
	for _, s := range scopes {
		r.Scopes = append(r.Scopes, mustPath(t, s))
	}
	r.Values = deviceUpdates(t, kv...)
	return r
}

// deviceUpdates returns the device's values as a Get answers them (full
// paths), from path=value pairs as deviceRead takes them.
func deviceUpdates(t testing.TB, kv ...string) []*gnmi.Update {
	t.Helper()
	var out []*gnmi.Update
	for n := 0; n+1 < len(kv); n += 2 {
		v := strVal(kv[n+1])
		if strings.HasPrefix(kv[n+1], "{") || strings.HasPrefix(kv[n+1], "[") {
			v = jsonVal(kv[n+1])
		}
		out = append(out, &gnmi.Update{Path: mustPath(t, kv[n]), Val: v})
	}
	return out
}

// proposeRead proposes ops with what the device held read before them.
func proposeRead(t testing.TB, j *Journal, read *DeviceRead, ops ...*Op) uint64 {
	t.Helper()
	p, err := j.ProposeChangeBy(context.Background(), Sender{Read: read}, ops)
	if err != nil {
		t.Fatalf("ProposeChangeBy with a device read: %v", err)
	}
	return p.GetIndex()
}

func renderAll(pvs []*PathValue) []string {
	out := make([]string, 0, len(pvs))
	for _, pv := range pvs {
		out = append(out, render(pv))
	}
	slices.Sort(out)
	return out
}

func mustProposal(t testing.TB, j *Journal, i uint64) *Proposal {
	t.Helper()
	p, err := j.Proposal(context.Background(), i)
	if err != nil {
		t.Fatalf("Proposal(%d): %v", i, err)
	}
	return p
}

// historyBefore returns the before-images the history deltas of proposal
// i's commit record, by path.
func historyBefore(t testing.TB, j *Journal, i uint64) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := j.History(context.Background(), time.Unix(0, 0), time.Time{}, func(d *HistoryDelta) error {
		if d.GetProposal() != i || d.GetKind() != HistoryKindCommitChange {
			return nil
		}
		for _, e := range d.GetEntries() {
			p := e.GetAfter().GetPath()
			if e.GetBefore() == nil {
				out[pathString(p)] = "nothing"
				continue
			}
			out[pathString(p)] = render(e.GetBefore())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	return out
}

func pathString(p *gnmi.Path) string {
	return strings.SplitN(render(&PathValue{Path: p, Deleted: true}), "=deleted@", 2)[0]
}

// TestDeviceReadsTakenAtCommit: what the device held where the journal
// knew nothing, read before a change, is in the committed and applied
// values (index 0) from the change's commit on, is the change's
// before-image (rollback values, history), and its rollback writes it back
// rather than deleting it.
func TestDeviceReadsTakenAtCommit(t *testing.T) {
	const eth0 = `{"name":"eth0","config":{"name":"eth0","mtu":1500,"description":"old"}}`
	tests := []struct {
		name   string
		read   *DeviceRead
		ops    []*Op
		prefix string
		// The committed values under prefix after the change's commit, the
		// change's values, its rollback values, and the committed values
		// after its rollback.
		committed, values, rollbackValues, rolledBack []string
	}{
		{
			name:           "a leaf",
			read:           deviceRead(t, []string{"/system/config/hostname"}, "/system/config/hostname", "dev"),
			ops:            []*Op{update(t, "/system/config/hostname", "new")},
			committed:      []string{"/system/config/hostname=new@1"},
			values:         []string{"/system/config/hostname=new@1"},
			rollbackValues: []string{"/system/config/hostname=dev@0"},
			rolledBack:     []string{"/system/config/hostname=dev@0"},
		},
		{
			name:           "a leaf the device does not hold, in a container it does",
			read:           deviceRead(t, []string{"/system/config"}, "/system/config", `{"hostname":"dev"}`),
			ops:            []*Op{update(t, "/system/config/domain-name", "example.com")},
			committed:      []string{`/system/config/domain-name=example.com@1`, `/system/config/hostname="dev"@0`},
			values:         []string{"/system/config/domain-name=example.com@1"},
			rollbackValues: []string{"/system/config/domain-name=deleted@0"},
			rolledBack:     []string{"/system/config/domain-name=deleted@0", `/system/config/hostname="dev"@0`},
		},
		{
			name: "a leaf in a list entry read at the entry",
			read: deviceRead(t, []string{"/interfaces/interface[name=eth0]"}, "/interfaces/interface[name=eth0]", eth0),
			ops:  []*Op{update(t, "/interfaces/interface[name=eth0]/config/description", "new")},
			committed: []string{"/interfaces/interface[name=eth0]/config/description=new@1",
				"/interfaces/interface[name=eth0]/config/mtu=1500@0", `/interfaces/interface[name=eth0]/config/name="eth0"@0`,
				"/interfaces/interface[name=eth0]={}@0"},
			// The entry's marker is not the change's: the device held the
			// entry, and the rollback must not delete it.
			values:         []string{"/interfaces/interface[name=eth0]/config/description=new@1"},
			rollbackValues: []string{`/interfaces/interface[name=eth0]/config/description="old"@0`},
			rolledBack: []string{`/interfaces/interface[name=eth0]/config/description="old"@0`,
				"/interfaces/interface[name=eth0]/config/mtu=1500@0", `/interfaces/interface[name=eth0]/config/name="eth0"@0`,
				"/interfaces/interface[name=eth0]={}@0"},
		},
		{
			name: "a new leaf in a list entry read at the entry",
			read: deviceRead(t, []string{"/interfaces/interface[name=eth0]"}, "/interfaces/interface[name=eth0]", eth0),
			ops:  []*Op{update(t, "/interfaces/interface[name=eth0]/config/enabled", "true")},
			committed: []string{`/interfaces/interface[name=eth0]/config/description="old"@0`,
				"/interfaces/interface[name=eth0]/config/enabled=true@1",
				"/interfaces/interface[name=eth0]/config/mtu=1500@0", `/interfaces/interface[name=eth0]/config/name="eth0"@0`,
				"/interfaces/interface[name=eth0]={}@0"},
			values:         []string{"/interfaces/interface[name=eth0]/config/enabled=true@1"},
			rollbackValues: []string{"/interfaces/interface[name=eth0]/config/enabled=deleted@0"},
			rolledBack: []string{`/interfaces/interface[name=eth0]/config/description="old"@0`,
				"/interfaces/interface[name=eth0]/config/enabled=deleted@0",
				"/interfaces/interface[name=eth0]/config/mtu=1500@0", `/interfaces/interface[name=eth0]/config/name="eth0"@0`,
				"/interfaces/interface[name=eth0]={}@0"},
		},
		{
			name: "a replace of a container with leaves the change does not name",
			read: deviceRead(t, []string{"/system/config"}, "/system/config",
				`{"hostname":"dev","domain-name":"example.com","login-banner":"hi"}`),
			ops:    []*Op{replace(t, "/system/config", "/system/config/hostname", "new")},
			prefix: "/system",
			committed: []string{"/system/config/domain-name=deleted@1", "/system/config/hostname=new@1",
				"/system/config/login-banner=deleted@1", "/system/config=deleted@1"},
			values: []string{"/system/config/domain-name=deleted@1", "/system/config/hostname=new@1",
				"/system/config/login-banner=deleted@1", "/system/config=deleted@1"},
			rollbackValues: []string{`/system/config/domain-name="example.com"@0`, `/system/config/hostname="dev"@0`,
				`/system/config/login-banner="hi"@0`, "/system/config=deleted@0"},
			rolledBack: []string{`/system/config/domain-name="example.com"@0`, `/system/config/hostname="dev"@0`,
				`/system/config/login-banner="hi"@0`, "/system/config=deleted@0"},
		},
		{
			name: "a delete of a subtree",
			read: deviceRead(t, []string{"/interfaces/interface[name=eth1]"}, "/interfaces/interface[name=eth1]",
				`{"name":"eth1","config":{"name":"eth1","mtu":9000}}`),
			ops: []*Op{del(t, "/interfaces/interface[name=eth1]")},
			committed: []string{"/interfaces/interface[name=eth1]/config/mtu=deleted@1",
				"/interfaces/interface[name=eth1]/config/name=deleted@1", "/interfaces/interface[name=eth1]=deleted@1"},
			values: []string{"/interfaces/interface[name=eth1]/config/mtu=deleted@1",
				"/interfaces/interface[name=eth1]/config/name=deleted@1", "/interfaces/interface[name=eth1]=deleted@1"},
			rollbackValues: []string{"/interfaces/interface[name=eth1]/config/mtu=9000@0",
				`/interfaces/interface[name=eth1]/config/name="eth1"@0`, "/interfaces/interface[name=eth1]={}@0"},
			rolledBack: []string{"/interfaces/interface[name=eth1]/config/mtu=9000@0",
				`/interfaces/interface[name=eth1]/config/name="eth1"@0`, "/interfaces/interface[name=eth1]={}@0"},
		},
		{
			name:           "the device holds nothing there",
			read:           &DeviceRead{Scopes: []*gnmi.Path{mustPath(t, "/system/config/hostname")}},
			ops:            []*Op{update(t, "/system/config/hostname", "new")},
			committed:      []string{"/system/config/hostname=new@1"},
			values:         []string{"/system/config/hostname=new@1"},
			rollbackValues: []string{"/system/config/hostname=deleted@0"},
			rolledBack:     []string{"/system/config/hostname=deleted@0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := openTest(t, "", Options{NoSync: true})
			ctx := context.Background()
			term := synced(t, j)
			var prefix *gnmi.Path
			if tt.prefix != "" {
				prefix = mustPath(t, tt.prefix)
			}
			i := proposeRead(t, j, tt.read, tt.ops...)
			checkInvariants(t, j)
			if got := committedList(t, j, prefix); len(got) != 0 {
				t.Fatalf("proposed: committed %v, want nothing (the reads are taken at the commit)", got)
			}
			if _, _, err := j.CommitChange(ctx, i); err != nil {
				t.Fatalf("CommitChange: %v", err)
			}
			checkInvariants(t, j)
			if got := sortedCommitted(t, j, prefix); !slices.Equal(got, sorted(tt.committed)) {
				t.Errorf("committed:\n got %v\nwant %v", got, tt.committed)
			}
			p := mustProposal(t, j, i)
			if got := renderAll(p.GetChange().GetValues()); !slices.Equal(got, sorted(tt.values)) {
				t.Errorf("change values:\n got %v\nwant %v", got, tt.values)
			}
			if got := renderAll(p.GetRollback().GetValues()); !slices.Equal(got, sorted(tt.rollbackValues)) {
				t.Errorf("rollback values:\n got %v\nwant %v", got, tt.rollbackValues)
			}
			// The history's before-images are the rollback values (the
			// device's value, or nothing where it held nothing).
			before := historyBefore(t, j, i)
			for _, rb := range p.GetRollback().GetValues() {
				want := render(rb)
				if rb.GetDeleted() && rb.GetIndex() == 0 {
					want = "nothing"
				}
				if got := before[pathString(rb.GetPath())]; got != want {
					t.Errorf("history before-image at %s: %s, want %s", pathString(rb.GetPath()), got, want)
				}
			}
			commitAndApplyFrom(t, j, term, i)
			checkInvariants(t, j)
			if got, want := appliedList(t, j), committedList(t, j, nil); !slices.Equal(got, want) {
				t.Errorf("applied %v, committed %v", got, want)
			}
			rollback(t, j, term, i)
			checkInvariants(t, j)
			if got := sortedCommitted(t, j, prefix); !slices.Equal(got, sorted(tt.rolledBack)) {
				t.Errorf("rolled back:\n got %v\nwant %v", got, tt.rolledBack)
			}
			if got, want := appliedList(t, j), committedList(t, j, nil); !slices.Equal(got, want) {
				t.Errorf("rolled back: applied %v, committed %v", got, want)
			}
		})
	}
}

// commitAndApplyFrom applies proposal i, already committed.
func commitAndApplyFrom(t testing.TB, j *Journal, term, i uint64) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := j.StartApply(ctx, i); err != nil {
		t.Fatalf("StartApply(%d): %v", i, err)
	}
	if _, _, err := j.CompleteApply(ctx, i, term); err != nil {
		t.Fatalf("CompleteApply(%d): %v", i, err)
	}
}

// TestDeviceReadsNotTaken: a read value is not taken where the committed
// values already hold something (an earlier change's value or tombstone),
// nor under an earlier change's tombstone of an ancestor (the device no
// longer holds it).
func TestDeviceReadsNotTaken(t *testing.T) {
	const eth0 = `{"name":"eth0","config":{"name":"eth0","mtu":1500,"description":"old"}}`
	tests := []struct {
		name string
		// earlier is journaled first; it is committed (and applied) after
		// the change with the read is proposed, as when the read raced it.
		earlier []*Op
		read    *DeviceRead
		ops     []*Op
		// The committed values after the change's commit, its rollback
		// values, and the committed values after its rollback.
		committed, rollbackValues, rolledBack []string
	}{
		{
			name:           "an earlier change's value",
			earlier:        []*Op{update(t, "/system/config/hostname", "mine")},
			read:           deviceRead(t, []string{"/system/config"}, "/system/config", `{"hostname":"dev","domain-name":"example.com"}`),
			ops:            []*Op{update(t, "/system/config/hostname", "new")},
			committed:      []string{`/system/config/domain-name="example.com"@0`, "/system/config/hostname=new@2"},
			rollbackValues: []string{"/system/config/hostname=mine@1"},
			rolledBack:     []string{`/system/config/domain-name="example.com"@0`, "/system/config/hostname=mine@1"},
		},
		{
			name:           "an earlier change's tombstone at the path",
			earlier:        []*Op{del(t, "/system/config/hostname")},
			read:           deviceRead(t, []string{"/system/config"}, "/system/config", `{"hostname":"dev","domain-name":"example.com"}`),
			ops:            []*Op{update(t, "/system/config/domain-name", "new")},
			committed:      []string{"/system/config/domain-name=new@2", "/system/config/hostname=deleted@1"},
			rollbackValues: []string{`/system/config/domain-name="example.com"@0`},
			rolledBack:     []string{`/system/config/domain-name="example.com"@0`, "/system/config/hostname=deleted@1"},
		},
		{
			name:    "under an earlier change's tombstone of the entry",
			earlier: []*Op{del(t, "/interfaces/interface[name=eth0]")},
			read:    deviceRead(t, []string{"/interfaces/interface[name=eth0]"}, "/interfaces/interface[name=eth0]", eth0),
			ops:     []*Op{update(t, "/interfaces/interface[name=eth0]/config/description", "new")},
			committed: []string{"/interfaces/interface[name=eth0]/config/description=new@2",
				"/interfaces/interface[name=eth0]={}@2"},
			rollbackValues: []string{"/interfaces/interface[name=eth0]/config/description=deleted@0",
				"/interfaces/interface[name=eth0]=deleted@1"},
			rolledBack: []string{"/interfaces/interface[name=eth0]/config/description=deleted@0",
				"/interfaces/interface[name=eth0]=deleted@1"},
		},
		{
			name:    "under an earlier change's tombstone of the whole list",
			earlier: []*Op{del(t, "/interfaces/interface")},
			read:    deviceRead(t, []string{"/interfaces/interface[name=eth0]"}, "/interfaces/interface[name=eth0]", eth0),
			ops:     []*Op{update(t, "/interfaces/interface[name=eth0]/config/description", "new")},
			committed: []string{"/interfaces/interface[name=eth0]/config/description=new@2",
				"/interfaces/interface=deleted@1", "/interfaces/interface[name=eth0]={}@2"},
			rollbackValues: []string{"/interfaces/interface[name=eth0]/config/description=deleted@0",
				"/interfaces/interface[name=eth0]=deleted@0"},
			rolledBack: []string{"/interfaces/interface=deleted@1", "/interfaces/interface[name=eth0]/config/description=deleted@0",
				"/interfaces/interface[name=eth0]=deleted@0"},
		},
		{
			name:    "under an earlier change's tombstone of a container above",
			earlier: []*Op{del(t, "/system")},
			read:    deviceRead(t, []string{"/system/config"}, "/system/config", `{"hostname":"dev","domain-name":"example.com"}`),
			ops:     []*Op{update(t, "/system/config/hostname", "new")},
			committed: []string{"/system/config/hostname=new@2",
				"/system=deleted@1"},
			rollbackValues: []string{"/system/config/hostname=deleted@0"},
			rolledBack:     []string{"/system/config/hostname=deleted@0", "/system=deleted@1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := openTest(t, "", Options{NoSync: true})
			ctx := context.Background()
			term := synced(t, j)
			p, err := j.ProposeChange(ctx, tt.earlier)
			if err != nil {
				t.Fatal(err)
			}
			i := proposeRead(t, j, tt.read, tt.ops...)
			checkInvariants(t, j)
			commitAndApply(t, j, term, p.GetIndex())
			checkInvariants(t, j)
			if _, _, err := j.CommitChange(ctx, i); err != nil {
				t.Fatalf("CommitChange: %v", err)
			}
			checkInvariants(t, j)
			got := committedList(t, j, nil)
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.committed))
			if !slices.Equal(got, want) {
				t.Errorf("committed:\n got %v\nwant %v", got, want)
			}
			if got := renderAll(mustProposal(t, j, i).GetRollback().GetValues()); !slices.Equal(got, sorted(tt.rollbackValues)) {
				t.Errorf("rollback values:\n got %v\nwant %v", got, tt.rollbackValues)
			}
			commitAndApplyFrom(t, j, term, i)
			checkInvariants(t, j)
			rollback(t, j, term, i)
			checkInvariants(t, j)
			got = committedList(t, j, nil)
			slices.Sort(got)
			if want := slices.Sorted(slices.Values(tt.rolledBack)); !slices.Equal(got, want) {
				t.Errorf("rolled back:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestCoverage: the read scopes of a change are covered from its commit
// on (not before), with everything under them and nothing above or beside
// them, and still after the journal is reopened.
func TestCoverage(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	term := synced(t, j)
	scopes := []string{"/system/config", "/interfaces/interface", "/network-instances/network-instance[name=default]", "openconfig:/acl"}
	probes := []struct {
		path    string
		covered bool
	}{
		{"/system/config", true},
		{"/system/config/hostname", true},
		{"/system/config/a/b/c", true},
		{"/system", false},
		{"/", false},
		{"/system/clock", false},
		{"/system/configx", false},
		{"/system/confi", false},
		{"/interfaces/interface", true}, // a keyless list path covers its entries
		{"/interfaces/interface[name=eth0]", true},
		{"/interfaces/interface[name=eth0]/config/mtu", true},
		{"/interfaces", false},
		{"/interfaces/interfacex", false},
		{"/network-instances/network-instance[name=default]", true},
		{"/network-instances/network-instance[name=default]/config/name", true},
		{"/network-instances/network-instance[name=other]", false},
		{"/network-instances/network-instance[name=default2]", false},
		{"/network-instances/network-instance[name=defaul]", false},
		{"/network-instances/network-instance", false},
		{"/network-instances", false},
		{"openconfig:/acl/acl-sets", true},
		{"other:/system/config", false}, // another origin
	}
	check := func(when string, wantCovered bool) {
		t.Helper()
		for _, pr := range probes {
			want := pr.covered && wantCovered
			if got := j.Covered(mustPath(t, pr.path)); got != want {
				t.Errorf("%s: Covered(%s) = %v, want %v", when, pr.path, got, want)
			}
		}
	}
	check("new journal", false)
	read := &DeviceRead{Values: deviceUpdates(t, "/system/config/hostname", "dev")}
	for _, s := range scopes {
		read.Scopes = append(read.Scopes, mustPath(t, s))
	}
	i := proposeRead(t, j, read, update(t, "/system/config/hostname", "new"))
	check("proposed", false)
	if got, err := j.ReadScopes(ctx); err != nil || len(got) != 0 {
		t.Fatalf("proposed: ReadScopes = %v, %v; want none", got, err)
	}
	commitAndApply(t, j, term, i)
	checkInvariants(t, j)
	check("committed", true)
	wantScopes := func() []string {
		ps := make([]*gnmi.Path, len(scopes))
		for n, s := range scopes {
			ps[n] = mustPath(t, s)
		}
		slices.SortFunc(ps, func(a, b *gnmi.Path) int { return slices.Compare(PathKey(a), PathKey(b)) })
		var out []string
		for _, p := range ps {
			out = append(out, pathString(p))
		}
		return out
	}()
	readScopes := func() []string {
		got, err := j.ReadScopes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range got {
			out = append(out, pathString(p))
		}
		return out
	}
	if got := readScopes(); !slices.Equal(got, wantScopes) {
		t.Errorf("ReadScopes = %v, want %v", got, wantScopes)
	}
	// A rollback of the change keeps the scopes: the journal still knows
	// what the device holds there.
	rollback(t, j, term, i)
	check("rolled back", true)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, err = Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	check("reopened", true)
	if got := readScopes(); !slices.Equal(got, wantScopes) {
		t.Errorf("reopened: ReadScopes = %v, want %v", got, wantScopes)
	}
	checkInvariants(t, j)
}

// TestCoverageNotAfterFailedCommit: a change whose commit fails leaves its
// scopes uncovered.
func TestCoverageNotAfterFailedCommit(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	ctx := context.Background()
	synced(t, j)
	i := proposeRead(t, j, deviceRead(t, []string{"/system/config"}, "/system/config/hostname", "dev"),
		update(t, "/system/config/hostname", "new"))
	if _, _, err := j.FailCommit(ctx, i, 3, "invalid"); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, j)
	if j.Covered(mustPath(t, "/system/config")) {
		t.Error("a failed commit's read scope is covered")
	}
	if got := committedList(t, j, nil); len(got) != 0 {
		t.Errorf("a failed commit's reads were taken: %v", got)
	}
}

// TestUnread: what the device held where it could not be read is unknown:
// an undo that would write there is refused, naming the path, and writes
// nothing; where the journal knew the value, the undo goes ahead.
func TestUnread(t *testing.T) {
	hostname := mustPath(t, "/system/config/hostname")
	tests := []struct {
		name string
		// earlier is applied first (nil: nothing).
		earlier []*Op
		unread  []string
		ops     []*Op
		// refused: the rollback, and a restore to before the change, are
		// refused naming refusedPath; else they go ahead.
		refused     bool
		refusedPath string
	}{
		{"an update", nil, []string{"/system/config"}, []*Op{update(t, "/system/config/hostname", "new")}, true, "/system/config/hostname"},
		{"an update of a leaf unread itself", nil, []string{"/system/config/hostname"}, []*Op{update(t, "/system/config/hostname", "new")}, true, "/system/config/hostname"},
		{"a delete", nil, []string{"/system/config"}, []*Op{del(t, "/system/config")}, true, "/system/config"},
		{"a replace", nil, []string{"/system/config"}, []*Op{replace(t, "/system/config", "/system/config/hostname", "new")}, true, "/system/config"},
		{"an entry", nil, []string{"/interfaces/interface[name=eth0]"}, []*Op{update(t, "/interfaces/interface[name=eth0]/config/mtu", "9000")}, true, "/interfaces/interface[name=eth0]"},
		{"the journal knew the value", []*Op{update(t, "/system/config/hostname", "mine")}, []string{"/system/config"},
			[]*Op{update(t, "/system/config/hostname", "new")}, false, ""},
		{"unread elsewhere", nil, []string{"/interfaces"}, []*Op{update(t, "/system/config/hostname", "new")}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := openTest(t, "", Options{NoSync: true})
			ctx := context.Background()
			term := synced(t, j)
			var first uint64
			if tt.earlier != nil {
				first = applyChange(t, j, term, tt.earlier...)
			}
			read := &DeviceRead{}
			for _, s := range tt.unread {
				read.Unread = append(read.Unread, mustPath(t, s))
			}
			i := proposeRead(t, j, read, tt.ops...)
			commitAndApply(t, j, term, i)
			checkInvariants(t, j)
			if j.Covered(hostname) {
				t.Error("an unread path is covered")
			}
			if !tt.refused {
				rollback(t, j, term, i)
				checkInvariants(t, j)
				return
			}
			before := dump(t, j)
			_, _, err := j.ProposeRollback(ctx, i)
			restore, rerr := j.ProposeRestore(ctx, Sender{}, Point{Index: first})
			_, _, derr := j.RestoreDiff(ctx, Point{Index: first})
			for what, err := range map[string]error{"ProposeRollback": err, "ProposeRestore": rerr, "RestoreDiff": derr} {
				if !errors.Is(err, ErrGuard) {
					t.Errorf("%s = %v, want ErrGuard", what, err)
					continue
				}
				if !strings.Contains(err.Error(), tt.refusedPath) || !strings.Contains(err.Error(), "not known") {
					t.Errorf("%s: %v, want a refusal naming %s as not known", what, err, tt.refusedPath)
				}
			}
			if restore != nil {
				t.Errorf("a restore was journaled: %v", restore)
			}
			if after := dump(t, j); !maps.Equal(before, after) {
				t.Error("a refused undo wrote to the journal")
			}
			if _, err := j.NewestRollbackable(ctx); !errors.Is(err, ErrGuard) {
				t.Errorf("NewestRollbackable = %v, want ErrGuard", err)
			}
			checkInvariants(t, j)
			// A later change there is known to the journal: it rolls back,
			// and a restore to right after the unread change is allowed.
			applyChange(t, j, term, update(t, "/system/config/hostname", "later"))
			if _, err := j.ProposeRestore(ctx, Sender{}, Point{Index: i}); err != nil {
				t.Fatalf("ProposeRestore to right after the unread change: %v", err)
			}
		})
	}
}

// TestBaseline: a baseline's chunks are baseline proposals, only the last
// final; its last commit makes it Configuration.baseline_index; it cannot
// be rolled back nor restored past; a restore to it is allowed.
func TestBaseline(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	ctx := context.Background()
	term := synced(t, j)
	scopes := []*gnmi.Path{mustPath(t, "/system"), mustPath(t, "/interfaces")}
	updates := deviceUpdates(t,
		"/system/config", `{"hostname":"dev","domain-name":"example.com"}`,
		"/interfaces", `{"openconfig-interfaces:interface":[
			{"name":"eth0","config":{"name":"eth0","mtu":1500}},
			{"name":"eth1","config":{"name":"eth1","description":"uplink"}}]}`)
	chunks, err := j.BaselineChunks(updates, 3)
	if err != nil {
		t.Fatalf("BaselineChunks: %v", err)
	}
	var units []string
	for n, ops := range chunks {
		if len(ops) > 3 || len(ops) == 0 {
			t.Errorf("chunk %d has %d operations, want 1 to 3", n, len(ops))
		}
		for _, op := range ops {
			if op.GetKind() != OpUpdate || len(op.GetValues()) != 1 || !samePath(op.GetPath(), op.GetValues()[0].GetPath()) {
				t.Errorf("chunk %d: operation %v is not an update of one unit at its own path", n, op)
			}
			units = append(units, render(&PathValue{Path: op.GetPath(), Value: op.GetValues()[0].GetValue()}))
		}
	}
	wantUnits := []string{
		`/interfaces/interface[name=eth0]/config/mtu=1500@0`, `/interfaces/interface[name=eth0]/config/name="eth0"@0`,
		`/interfaces/interface[name=eth0]={}@0`,
		`/interfaces/interface[name=eth1]/config/description="uplink"@0`, `/interfaces/interface[name=eth1]/config/name="eth1"@0`,
		`/interfaces/interface[name=eth1]={}@0`,
		`/system/config/domain-name="example.com"@0`, `/system/config/hostname="dev"@0`,
	}
	slices.Sort(units)
	if !slices.Equal(units, wantUnits) {
		t.Fatalf("baseline units:\n got %v\nwant %v", units, wantUnits)
	}
	if len(chunks) != 3 {
		t.Fatalf("%d chunks of 8 units at most 3 each, want 3", len(chunks))
	}
	var indexes []uint64
	var first uint64
	for n, ops := range chunks {
		final := n == len(chunks)-1
		p, err := j.ProposeBaseline(ctx, Sender{Author: "device"}, scopes, ops, BaselinePart{First: first, Final: final})
		if first == 0 {
			first = p.GetIndex()
		}
		if err != nil {
			t.Fatalf("ProposeBaseline %d: %v", n, err)
		}
		checkInvariants(t, j)
		if ch := p.GetChange(); !ch.GetBaseline() || ch.GetFinalChunk() != final || !ch.GetAdopted() || ch.GetAdoptedTerm() != term {
			t.Errorf("proposal %d: baseline %v, final %v, adopted %v (term %d); want baseline, final %v, adopted in term %d",
				p.GetIndex(), ch.GetBaseline(), ch.GetFinalChunk(), ch.GetAdopted(), ch.GetAdoptedTerm(), final, term)
		}
		st, err := j.ProposalStatus(ctx, p.GetIndex())
		if err != nil {
			t.Fatal(err)
		}
		if !st.GetChange().GetBaseline() {
			t.Errorf("ProposalStatus(%d) does not say it is a baseline", p.GetIndex())
		}
		commitAndApply(t, j, term, p.GetIndex())
		checkInvariants(t, j)
		c, err := j.Configuration(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(0)
		if final {
			want = p.GetIndex()
		}
		if c.GetBaselineIndex() != want {
			t.Errorf("after chunk %d: baseline_index %d, want %d", n, c.GetBaselineIndex(), want)
		}
		indexes = append(indexes, p.GetIndex())
	}
	last := indexes[len(indexes)-1]
	baseline := []string{
		`/interfaces/interface[name=eth0]/config/mtu=1500@`, `/interfaces/interface[name=eth0]/config/name="eth0"@`,
		`/interfaces/interface[name=eth0]={}@`,
		`/interfaces/interface[name=eth1]/config/description="uplink"@`, `/interfaces/interface[name=eth1]/config/name="eth1"@`,
		`/interfaces/interface[name=eth1]={}@`,
		`/system/config/domain-name="example.com"@`, `/system/config/hostname="dev"@`,
	}
	got := committedList(t, j, nil)
	for n := range got {
		got[n] = strings.TrimRight(got[n], "0123456789")
	}
	slices.Sort(got)
	if !slices.Equal(got, baseline) {
		t.Errorf("committed after the baseline:\n got %v\nwant %v", got, baseline)
	}
	for _, s := range []string{"/system/config/hostname", "/interfaces/interface[name=eth9]/config/mtu"} {
		if !j.Covered(mustPath(t, s)) {
			t.Errorf("%s is not covered after the baseline", s)
		}
	}

	// A client's change after it.
	applyChange(t, j, term, update(t, "/system/config/hostname", "new"), del(t, "/interfaces/interface[name=eth1]"))
	checkInvariants(t, j)

	// No baseline proposal rolls back, whatever the state.
	for _, i := range indexes {
		before := dump(t, j)
		if _, _, err := j.ProposeRollback(ctx, i); !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), "baseline") {
			t.Errorf("ProposeRollback(%d) of a baseline = %v, want ErrGuard mentioning the baseline", i, err)
		}
		if !maps.Equal(before, dump(t, j)) {
			t.Errorf("a refused rollback of %d wrote", i)
		}
	}
	// No restore goes back past it.
	for _, pt := range []Point{{Index: 0}, {Index: indexes[0]}, {Index: last - 1}} {
		if _, err := j.ProposeRestore(ctx, Sender{}, pt); !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), "baseline") {
			t.Errorf("ProposeRestore(%v) = %v, want ErrGuard mentioning the baseline", pt, err)
		}
		// Its dry run is refused the same way.
		if _, _, err := j.RestoreDiff(ctx, pt); !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), "baseline") {
			t.Errorf("RestoreDiff(%v) = %v, want ErrGuard mentioning the baseline", pt, err)
		}
	}
	// A restore to it is allowed, by index and by tag.
	if _, err := j.CreateTag(ctx, BaselineTag, Point{Index: last}, Sender{Author: "device"}); err != nil {
		t.Fatal(err)
	}
	p, err := j.ProposeRestore(ctx, Sender{}, Point{Tag: BaselineTag})
	if err != nil {
		t.Fatalf("ProposeRestore(baseline): %v", err)
	}
	commitAndApply(t, j, term, p.GetIndex())
	checkInvariants(t, j)
	got = committedList(t, j, nil)
	var live []string
	for _, s := range got {
		if !strings.Contains(s, "=deleted@") {
			live = append(live, strings.TrimRight(s, "0123456789"))
		}
	}
	slices.Sort(live)
	if !slices.Equal(live, baseline) {
		t.Errorf("restored to the baseline:\n got %v\nwant %v", live, baseline)
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// sortedCommitted is committedList in string order.
func sortedCommitted(t testing.TB, j *Journal, prefix *gnmi.Path) []string {
	t.Helper()
	return sorted(committedList(t, j, prefix))
}

// samePath compares two paths by their journal keys.
func samePath(a, b *gnmi.Path) bool { return string(PathKey(a)) == string(PathKey(b)) }

// journalBaseline journals updates as a baseline of scopes in chunks of at
// most max units, committing and applying each, and returns its proposals.
func journalBaseline(t testing.TB, j *Journal, term uint64, scopes []*gnmi.Path, updates []*gnmi.Update, max int) []uint64 {
	t.Helper()
	ctx := context.Background()
	chunks, err := j.BaselineChunks(updates, max)
	if err != nil {
		t.Fatalf("BaselineChunks: %v", err)
	}
	var out []uint64
	var first uint64
	for n, ops := range chunks {
		p, err := j.ProposeBaseline(ctx, Sender{Author: "device"}, scopes, ops, BaselinePart{First: first, Final: n == len(chunks)-1})
		if first == 0 {
			first = p.GetIndex()
		}
		if err != nil {
			t.Fatalf("ProposeBaseline %d: %v", n, err)
		}
		checkInvariants(t, j)
		commitAndApply(t, j, term, p.GetIndex())
		checkInvariants(t, j)
		out = append(out, p.GetIndex())
	}
	c, err := j.Configuration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last := out[len(out)-1]; c.GetBaselineIndex() != last {
		t.Fatalf("baseline_index %d, want %d", c.GetBaselineIndex(), last)
	}
	return out
}

// liveCommitted returns the committed values that are not tombstones,
// without their indexes, sorted; and the tombstones' paths, sorted.
func liveCommitted(t testing.TB, j *Journal) (live, deleted []string) {
	t.Helper()
	for _, s := range committedList(t, j, nil) {
		if path, _, ok := strings.Cut(s, "=deleted@"); ok {
			deleted = append(deleted, path)
			continue
		}
		live = append(live, s[:strings.LastIndexByte(s, '@')])
	}
	slices.Sort(live)
	slices.Sort(deleted)
	return live, deleted
}

// TestSyncFrom: a second baseline over a journal holding values the
// device no longer holds deletes them (removeStale) under its scopes, and
// keeps what it wrote itself, in any of its chunks, and everything outside
// its scopes.
func TestSyncFrom(t *testing.T) {
	for _, max := range []int{1, 2, 3, 100} {
		t.Run(fmt.Sprintf("chunks of %d", max), func(t *testing.T) {
			j := openTest(t, "", Options{NoSync: true})
			ctx := context.Background()
			term := synced(t, j)
			scopes := []*gnmi.Path{mustPath(t, "/system"), mustPath(t, "/interfaces")}
			first := journalBaseline(t, j, term, scopes, deviceUpdates(t,
				"/system/config", `{"hostname":"dev","domain-name":"example.com"}`,
				"/interfaces", `{"interface":[
					{"name":"eth0","config":{"name":"eth0","mtu":1500}},
					{"name":"eth1","config":{"name":"eth1","description":"uplink"}}]}`), max)
			applyChange(t, j, term, update(t, "/system/config/login-banner", "hi"), update(t, "/other/x", "1"),
				update(t, "/interfaces/interface[name=eth2]/config/name", "eth2"))
			checkInvariants(t, j)
			second := journalBaseline(t, j, term, scopes, deviceUpdates(t,
				"/system/config", `{"hostname":"dev2"}`,
				"/interfaces", `{"interface":[{"name":"eth0","config":{"name":"eth0","mtu":9000}}]}`), max)
			live, deleted := liveCommitted(t, j)
			wantLive := []string{
				"/interfaces/interface[name=eth0]/config/mtu=9000", `/interfaces/interface[name=eth0]/config/name="eth0"`,
				"/interfaces/interface[name=eth0]={}",
				"/other/x=1",
				`/system/config/hostname="dev2"`,
			}
			wantDeleted := []string{
				"/interfaces/interface[name=eth1]", "/interfaces/interface[name=eth1]/config/description",
				"/interfaces/interface[name=eth1]/config/name",
				"/interfaces/interface[name=eth2]", "/interfaces/interface[name=eth2]/config/name",
				"/system/config/domain-name", "/system/config/login-banner",
			}
			slices.Sort(wantLive)
			slices.Sort(wantDeleted)
			if !slices.Equal(live, wantLive) {
				t.Errorf("live after sync-from:\n got %v\nwant %v", live, wantLive)
			}
			if !slices.Equal(deleted, wantDeleted) {
				t.Errorf("deleted after sync-from:\n got %v\nwant %v", deleted, wantDeleted)
			}
			// Only the newest baseline bounds restores.
			if _, err := j.ProposeRestore(ctx, Sender{}, Point{Index: first[len(first)-1]}); !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), "baseline") {
				t.Errorf("restore to the first baseline = %v, want ErrGuard mentioning the baseline", err)
			}
			if _, err := j.ProposeRestore(ctx, Sender{}, Point{Index: second[len(second)-1]}); !errors.Is(err, ErrNoChange) {
				t.Errorf("restore to the second baseline = %v, want ErrNoChange", err)
			}
		})
	}
}

// TestEmptyBaseline: a baseline with no operations (a device that holds
// nothing in the scopes) is journaled, committed and applied; over a
// journal that holds values in the scopes, it deletes them.
func TestEmptyBaseline(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	ctx := context.Background()
	term := synced(t, j)
	chunks, err := j.BaselineChunks(nil, 3)
	if err != nil || len(chunks) != 1 || len(chunks[0]) != 0 {
		t.Fatalf("BaselineChunks(nothing) = %v, %v; want one empty chunk", chunks, err)
	}
	scopes := []*gnmi.Path{mustPath(t, "/system")}
	b := journalBaseline(t, j, term, scopes, nil, 3)
	if got := committedList(t, j, nil); len(got) != 0 {
		t.Errorf("an empty baseline wrote %v", got)
	}
	if !j.Covered(mustPath(t, "/system/config")) {
		t.Error("an empty baseline's scope is not covered")
	}
	if _, _, err := j.ProposeRollback(ctx, b[0]); !errors.Is(err, ErrGuard) {
		t.Errorf("rollback of an empty baseline = %v, want ErrGuard", err)
	}
	applyChange(t, j, term, update(t, "/system/config/hostname", "x"), update(t, "/other", "y"))
	journalBaseline(t, j, term, scopes, nil, 3)
	live, deleted := liveCommitted(t, j)
	if !slices.Equal(live, []string{"/other=y"}) || !slices.Equal(deleted, []string{"/system/config/hostname"}) {
		t.Errorf("after an empty baseline: live %v, deleted %v; want /other=y, /system/config/hostname deleted", live, deleted)
	}
	// Other proposals still need operations.
	if _, err := j.ProposeChange(ctx, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("ProposeChange(no operations) = %v, want ErrInvalid", err)
	}
}

// TestCommittedAtBeforeDeviceRead: a History snapshot at a time before a
// change finds what the device held then, read before the change.
func TestCommittedAtBeforeDeviceRead(t *testing.T) {
	clock := &fakeClock{}
	j := openTest(t, "", Options{NoSync: true, Clock: clock.now})
	term := synced(t, j)
	clock.sec.Store(10)
	applyChange(t, j, term, update(t, "/a", "mine"))
	clock.sec.Store(20)
	i := proposeRead(t, j, deviceRead(t, []string{"/system/config"}, "/system/config",
		`{"hostname":"dev","domain-name":"example.com"}`),
		update(t, "/system/config/hostname", "new"), del(t, "/system/config/domain-name"))
	commitAndApply(t, j, term, i)
	checkInvariants(t, j)
	clock.sec.Store(30)
	applyChange(t, j, term, update(t, "/system/config/hostname", "newer"))
	clock.sec.Store(40)
	rollback(t, j, term, i+1)
	rollback(t, j, term, i)
	checkInvariants(t, j)
	cases := []struct {
		at   int64
		want []string
	}{
		{5, []string{`/system/config/domain-name="example.com"@0`, `/system/config/hostname="dev"@0`}},
		{15, []string{`/system/config/domain-name="example.com"@0`, `/system/config/hostname="dev"@0`}},
		{25, []string{"/system/config/domain-name=deleted@2", "/system/config/hostname=new@2"}},
		{35, []string{"/system/config/domain-name=deleted@2", "/system/config/hostname=newer@3"}},
		{45, []string{`/system/config/domain-name="example.com"@0`, `/system/config/hostname="dev"@0`}},
	}
	for _, c := range cases {
		got, err := committedAtList(t, j, c.at, mustPath(t, "/system"))
		if err != nil || !slices.Equal(sorted(got), sorted(c.want)) {
			t.Errorf("at %d: %v, %v; want %v", c.at, got, err, c.want)
		}
	}
}

// TestSyncFromAfterCutShortBaseline: a baseline cut short (chunks journaled
// without their final one, as when the sidecar stops in the middle of
// SyncFrom; NeedsBaseline then asks for a new one) is not part of the next
// baseline: what only it wrote, the device no longer holding it, is
// deleted by the next baseline like anything else it does not read.
func TestSyncFromAfterCutShortBaseline(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	ctx := context.Background()
	term := synced(t, j)
	scopes := []*gnmi.Path{mustPath(t, "/system")}
	p, err := j.ProposeBaseline(ctx, Sender{Author: "device"}, scopes, []*Op{update(t, "/system/x", "old")}, BaselinePart{})
	if err != nil {
		t.Fatal(err)
	}
	commitAndApply(t, j, term, p.GetIndex())
	checkInvariants(t, j)
	// The device no longer holds /system/x when it is read again.
	journalBaseline(t, j, term, scopes, deviceUpdates(t, "/system/y", "1", "/system/z", "2"), 1)
	live, _ := liveCommitted(t, j)
	if want := []string{"/system/y=1", "/system/z=2"}; !slices.Equal(live, want) {
		t.Errorf("after a baseline following one cut short: %v, want %v (the cut-short chunk's /system/x is not on the device)", live, want)
	}
}

// TestDeviceReadOpenConfigOrigin: a device answering a read with origin
// "openconfig" (in its notification's prefix) for a change sent without
// an origin: journal.proto (Meta, format 5) says the two are one leaf, so
// the change's before-image is the device's value.
func TestDeviceReadOpenConfigOrigin(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	term := synced(t, j)
	i := proposeRead(t, j, deviceRead(t, []string{"/system/config"}, "openconfig:/system/config", `{"hostname":"dev"}`),
		update(t, "/system/config/hostname", "new"))
	commitAndApply(t, j, term, i)
	checkInvariants(t, j)
	got := renderAll(mustProposal(t, j, i).GetRollback().GetValues())
	if len(got) != 1 || !strings.HasSuffix(got[0], `="dev"@0`) {
		t.Errorf("rollback values %v, want the device's hostname \"dev\" (committed: %v)", got, committedList(t, j, nil))
	}
}

// TestLearnedKeysPersist: the list keys learned from the device's JSON
// (a baseline's, a change's device reads) are kept across a reopen: the
// journal decomposes JSON of those lists afterwards without a schema.
func TestLearnedKeysPersist(t *testing.T) {
	const ifaces = `{"interface":[{"name":"eth0","config":{"name":"eth0","mtu":1500}}]}`
	const nis = `{"network-instance":[{"name":"default","config":{"name":"default"}}]}`
	dir := t.TempDir()
	j, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Without the keys, JSON holding a list is refused.
	if _, err := j.ProposeChange(ctx, []*Op{update(t, "/interfaces", ifaces)}); err == nil {
		t.Fatal("a JSON list of unknown keys was journaled")
	}
	term := synced(t, j)
	journalBaseline(t, j, term, []*gnmi.Path{mustPath(t, "/interfaces")}, deviceUpdates(t, "/interfaces", ifaces), 2)
	i := proposeRead(t, j, deviceRead(t, []string{"/network-instances"}, "/network-instances", nis),
		update(t, "/network-instances/network-instance[name=default]/config/name", "default"))
	commitAndApply(t, j, term, i)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, err = Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, op := range []*Op{
		update(t, "/interfaces", `{"interface":[{"name":"eth1","config":{"name":"eth1"}}]}`),
		update(t, "/network-instances", `{"network-instance":[{"name":"red","config":{"name":"red"}}]}`),
	} {
		if _, err := j.ProposeChange(ctx, []*Op{op}); err != nil {
			t.Errorf("reopened: JSON of a learned list %s: %v", pathString(op.GetPath()), err)
		}
	}
}

// TestBaselineChunksInterleaved: a client's change journaled between two
// chunks of a baseline (SyncFrom proposes its chunks one by one, and
// nothing holds a client's Set meanwhile) does not cut the baseline in
// two: what its earlier chunks wrote is the device's and stays.
func TestBaselineChunksInterleaved(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	ctx := context.Background()
	term := synced(t, j)
	scopes := []*gnmi.Path{mustPath(t, "/system")}
	p, err := j.ProposeBaseline(ctx, Sender{Author: "device"}, scopes, []*Op{update(t, "/system/a", "1")}, BaselinePart{})
	if err != nil {
		t.Fatal(err)
	}
	commitAndApply(t, j, term, p.GetIndex())
	applyChange(t, j, term, update(t, "/other", "c"))
	first := p.GetIndex()
	p, err = j.ProposeBaseline(ctx, Sender{Author: "device"}, scopes, []*Op{update(t, "/system/b", "2")}, BaselinePart{First: first, Final: true})
	if err != nil {
		t.Fatal(err)
	}
	commitAndApply(t, j, term, p.GetIndex())
	checkInvariants(t, j)
	live, deleted := liveCommitted(t, j)
	if want := []string{"/other=c", "/system/a=1", "/system/b=2"}; !slices.Equal(live, want) || len(deleted) != 0 {
		t.Errorf("after a baseline with a change between its chunks: live %v, deleted %v; want %v, nothing deleted", live, deleted, want)
	}
}

// TestDeviceReadsAfterFailedApply: when the device refuses a change whose
// reads were taken in, the committed and applied values go back to what
// the device holds: its own values, read before the change.
func TestDeviceReadsAfterFailedApply(t *testing.T) {
	j := openTest(t, "", Options{NoSync: true})
	ctx := context.Background()
	synced(t, j)
	i := proposeRead(t, j, deviceRead(t, []string{"/system/config"}, "/system/config", `{"hostname":"dev","domain-name":"example.com"}`),
		update(t, "/system/config/hostname", "new"), del(t, "/system/config/domain-name"))
	if _, _, err := j.CommitChange(ctx, i); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.StartApply(ctx, i); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.FailApply(ctx, i, 3, "refused"); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, j)
	want := []string{`/system/config/domain-name="example.com"@0`, `/system/config/hostname="dev"@0`}
	if got := sortedCommitted(t, j, nil); !slices.Equal(got, want) {
		t.Errorf("committed after the failed apply: %v, want %v", got, want)
	}
	if got := sorted(appliedList(t, j)); !slices.Equal(got, want) {
		t.Errorf("applied after the failed apply: %v, want %v", got, want)
	}
	if !j.Covered(mustPath(t, "/system/config/hostname")) {
		t.Error("the read scope of a change whose apply failed is not covered (its reads were taken)")
	}
}
