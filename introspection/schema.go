package introspection

// The names and the shape of the tree (docs/introspection.md). Each name
// is spelled once, below; the leaves of each state container are listed
// once, in render.go's tables, and schema derives the shape that request
// paths are checked against from those tables.

import "strings"

// Names of the tree's containers, lists, keys and leaves. The operator
// commands read the tree by these names.
const (
	Action                   = "action"
	Address                  = "address"
	Adopted                  = "adopted"
	Adoptions                = "adoptions"
	Applied                  = "applied"
	AppliedIndex             = "applied-index"
	AppliedProposal          = "applied-proposal"
	AppliedTarget            = "applied-target"
	AppliedTerm              = "applied-term"
	ApplyStarted             = "apply-started"
	ApplyStatus              = "apply-status"
	Author                   = "author"
	Cancelled                = "cancelled"
	Capped                   = "capped"
	Cause                    = "cause"
	Change                   = "change"
	Changes                  = "changes"
	Checks                   = "checks"
	Comment                  = "comment"
	CommitConfirm            = "commit-confirm"
	CommitConfirmedBy        = "commit-confirmed-by"
	CommitConfirmedAt        = "commit-confirmed-at"
	CommitCancelledBy        = "commit-cancelled-by"
	CommitCancelledAt        = "commit-cancelled-at"
	CommitExtendedBy         = "commit-extended-by"
	CommitExtendedAt         = "commit-extended-at"
	CancelledBy              = "cancelled-by"
	ExtendedBy               = "extended-by"
	Extended                 = "extended"
	TagDeletions             = "tag-deletions"
	TagDeletion              = "tag-deletion"
	CommitStatus             = "commit-status"
	Committed                = "committed"
	CommittedIndex           = "committed-index"
	CommittedProposal        = "committed-proposal"
	Configuration            = "configuration"
	Connected                = "connected"
	Created                  = "created"
	Deadline                 = "deadline"
	Deleted                  = "deleted"
	Detected                 = "detected"
	Device                   = "device"
	DeviceAbsent             = "device-absent"
	DeviceValue              = "device-value"
	Diff                     = "diff"
	Drift                    = "drift"
	ErrorCode                = "error-code"
	ErrorMessage             = "error-message"
	Fenced                   = "fenced"
	Retrying                 = "retrying"
	RetryingAttempts         = "retrying-attempts"
	RetryingSince            = "retrying-since"
	FencedBy                 = "fenced-by"
	FirstIndex               = "first-index"
	HistoryFloor             = "history-floor"
	ID                       = "id"
	Index                    = "index"
	Interval                 = "interval"
	JournalDeleted           = "journal-deleted"
	JournalValue             = "journal-value"
	Kind                     = "kind"
	LastCheck                = "last-check"
	LastError                = "last-error"
	LastIndex                = "last-index"
	LastRepushDeviceDuration = "last-repush-device-duration"
	LastRepushDuration       = "last-repush-duration"
	LastRepushTime           = "last-repush-time"
	LastRepushValues         = "last-repush-values"
	Mode                     = "mode"
	Name                     = "name"
	Operation                = "operation"
	Operations               = "operations"
	OutOfSync                = "out-of-sync"
	BaselineIndex            = "baseline-index"
	Path                     = "path"
	Paths                    = "paths"
	Phase                    = "phase"
	Policy                   = "policy"
	PreviousDeleted          = "previous-deleted"
	PreviousIndex            = "previous-index"
	PreviousValue            = "previous-value"
	Proposal                 = "proposal"
	Proposals                = "proposals"
	Proposed                 = "proposed"
	Repushing                = "repushing"
	Resolution               = "resolution"
	Resolutions              = "resolutions"
	ReadError                = "read-error"
	ReadMethod               = "read-method"
	Readable                 = "readable"
	Restorable               = "restorable"
	RestoresIndex            = "restores-index"
	RestoresTag              = "restores-tag"
	Reverts                  = "reverts"
	RollbackApplied          = "rollback-applied"
	RollbackApplyStarted     = "rollback-apply-started"
	RollbackApplyStatus      = "rollback-apply-status"
	RollbackAuthor           = "rollback-author"
	RollbackComment          = "rollback-comment"
	RollbackCommitStatus     = "rollback-commit-status"
	RollbackCommitted        = "rollback-committed"
	RollbackErrorCode        = "rollback-error-code"
	RollbackErrorMessage     = "rollback-error-message"
	RollbackIndex            = "rollback-index"
	RollbackProposed         = "rollback-proposed"
	RollingBack              = "rolling-back"
	Seq                      = "seq"
	Settled                  = "settled"
	Since                    = "since"
	Started                  = "started"
	State                    = "state"
	Status                   = "status"
	StillOutOfSync           = "still-out-of-sync"
	Tag                      = "tag"
	Tags                     = "tags"
	Target                   = "target"
	Term                     = "term"
	Time                     = "time"
	Value                    = "value"
	WatchError               = "watch-error"
)

// schemaNode is one element of the tree's shape: a container, a list (key
// set) or a leaf (no children).
type schemaNode struct {
	name     string
	key      string // the list key; "" for a container or a leaf
	children []*schemaNode
}

func (n *schemaNode) child(name string) *schemaNode {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (n *schemaNode) childNames() string {
	names := make([]string, len(n.children))
	for k, c := range n.children {
		names[k] = c.name
	}
	return strings.Join(names, ", ")
}

func schemaContainer(name string, children ...*schemaNode) *schemaNode {
	return &schemaNode{name: name, children: children}
}

func schemaList(name, key string, children ...*schemaNode) *schemaNode {
	return &schemaNode{name: name, key: key, children: children}
}

// schemaState is the state container of the leaves of fields.
func schemaState[R any](fields []field[R]) *schemaNode {
	n := schemaContainer(State)
	for _, f := range fields {
		n.children = append(n.children, &schemaNode{name: f.name})
	}
	return n
}

// schema returns the shape of the tree, for checking request paths: the
// containers and lists render.go renders, with the leaves of its tables.
func schema() *schemaNode {
	return schemaContainer("",
		schemaContainer(Configuration, schemaState(configurationFields())),
		schemaContainer(Device, schemaState(deviceFields())),
		schemaContainer(CommitConfirm, schemaState(commitConfirmFields())),
		schemaContainer(OutOfSync, schemaList(Path, Path, schemaState(outOfSyncFields()))),
		schemaContainer(Resolutions, schemaList(Resolution, Seq, schemaState(resolutionFields()))),
		schemaContainer(Tags, schemaList(Tag, Name, schemaState(tagFields()))),
		schemaContainer(TagDeletions, schemaList(TagDeletion, Seq, schemaState(tagDeletionFields()))),
		schemaContainer(Drift, schemaState(driftFields()), schemaList(Path, Path, schemaState(driftPathFields()))),
		schemaContainer(Diff, schemaState(diffFields()), schemaList(Path, Path, schemaState(diffPathFields()))),
		schemaContainer(Proposals, schemaList(Proposal, Index,
			schemaState(proposalFields()),
			schemaContainer(Operations, schemaList(Operation, Seq, schemaState(operationFields()))),
			schemaContainer(Changes, schemaList(Change, Path, schemaState(changeFields()))))))
}
