package runtime

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/narad-io/storage/wire"
)

// TopicRecord is the metastore's truth about a topic: what incarnation
// markers are checked against.
type TopicRecord struct {
	Name           string             `json:"name"`
	Incarnation    wire.IncarnationID `json:"incarnation,omitempty"` // made at create, kept by every update
	Partitions     int                `json:"partitions"`
	RetentionMs    int64              `json:"retention_ms"`              // 0: no age bound
	RetentionBytes int64              `json:"retention_bytes,omitempty"` // per partition; 0: no size bound
	// DictionaryAfter: a node trains the topic a zstd dictionary by itself
	// once this many records were produced to it there and it has none
	// (docs/design.md, "Dictionaries"); 0, the default: never.
	DictionaryAfter int64  `json:"dictionary_after,omitempty"`
	Version         uint64 `json:"version"` // moves at every change
}

// Retention bounds what each partition of a topic keeps (docs/design.md,
// "Retention"): sealed segments whose last write is older than Ms
// milliseconds go, and the oldest sealed segments while the partition's
// segments hold more than Bytes; 0 is no bound, and either or both may be
// set. The active segment is never deleted.
type Retention struct {
	Ms    int64
	Bytes int64
}

// MaxRetentionMs is the longest age bound a retention holds: the most
// milliseconds a time.Duration holds (about 292 years). A longer one
// would wrap to a short or negative age when converted, and a short one
// deletes the topic's history.
const MaxRetentionMs = math.MaxInt64 / int64(time.Millisecond)

// inRange reports whether no bound is negative (0 is no bound) and the
// age bound is a duration.
func (r Retention) inRange() bool { return r.Ms >= 0 && r.Ms <= MaxRetentionMs && r.Bytes >= 0 }

// maxAge is the age bound as a duration; one past MaxRetentionMs (a
// record written before the bound was checked) is held at the longest,
// never wrapped.
func (r Retention) maxAge() time.Duration {
	return time.Duration(min(r.Ms, MaxRetentionMs)) * time.Millisecond
}

// Retention is the record's retention bounds.
func (r TopicRecord) Retention() Retention {
	return Retention{Ms: r.RetentionMs, Bytes: r.RetentionBytes}
}

// Metastore is what a node needs from the cluster's metadata.
type Metastore interface {
	// Topic returns a topic's record; ok is false when there is none.
	Topic(ctx context.Context, name string) (rec TopicRecord, ok bool, err error)
	// Topics lists every topic.
	Topics(ctx context.Context) ([]TopicRecord, error)
	// CreateTopic creates a topic with a fresh incarnation id; an existing
	// one is returned as it is, with created false.
	CreateTopic(ctx context.Context, name string, partitions int, retention Retention) (rec TopicRecord, created bool, err error)
	// UpdateRetention changes a topic's retention to what change makes of
	// the current bounds, atomically (no other change lands in between),
	// keeping its incarnation; an error of change aborts it. change must
	// be a pure function of its argument: it may run under the metastore's
	// lock, and more than once (a metastore that compares and swaps).
	UpdateRetention(ctx context.Context, name string, change func(Retention) (Retention, error)) (TopicRecord, error)
	// SetDictionaryAfter sets a topic's DictionaryAfter, keeping the rest
	// of its record.
	SetDictionaryAfter(ctx context.Context, name string, records int64) (TopicRecord, error)
	// DeleteTopic removes a topic's record.
	DeleteTopic(ctx context.Context, name string) error
	// Assigned reports whether this node owns the partition.
	Assigned(ctx context.Context, topic string, partition int) (bool, error)
	// Subscribe calls f with the name of every topic whose record changes
	// (created, updated, deleted) from now on, until the returned cancel.
	Subscribe(f func(topic string)) (cancel func())
	// CaughtUp reports whether this node's replica is caught up with the
	// leader.
	CaughtUp() bool
	// IncarnationGone confirms, with the leader, that a topic incarnation
	// no longer exists (the record is absent or carries another id). For
	// the empty id (a directory with no marker, which could be any
	// incarnation's) it confirms that no record exists at all.
	IncarnationGone(ctx context.Context, name string, id wire.IncarnationID) (bool, error)
}

// RefusedTopicDeleter is a Metastore that may hold a topic record it
// refuses to serve (cluster.EtcdMetastore: a record no node would have
// written), which no listing or lookup shows. Node.DeleteTopic deletes
// such a record when asked to delete the topic, rather than answering
// that there is none: the operator's way out without editing the store
// by hand. DeleteRefusedTopic deletes the record under name only while
// it is one the metastore refuses (deleted true); a name with no record,
// or with one it serves, is left alone.
type RefusedTopicDeleter interface {
	DeleteRefusedTopic(ctx context.Context, name string) (deleted bool, err error)
}

// ErrTopicNotFound: no topic of that name.
var ErrTopicNotFound = errors.New("runtime: topic not found")
