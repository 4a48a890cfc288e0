package runtime

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"sync"

	"github.com/narad-io/storage/internal/fsys"
	"github.com/narad-io/storage/wire"
)

// TopicRecord is the metastore's truth about a topic: what incarnation
// markers are checked against.
type TopicRecord struct {
	Name        string             `json:"name"`
	Incarnation wire.IncarnationID `json:"incarnation,omitempty"` // made at create, kept by every update
	Partitions  int                `json:"partitions"`
	RetentionMs int64              `json:"retention_ms"` // 0 keeps forever
	Version     uint64             `json:"version"`      // moves at every change
}

// Metastore is what a node needs from the cluster's metadata.
type Metastore interface {
	// Topic returns a topic's record; ok is false when there is none.
	Topic(ctx context.Context, name string) (rec TopicRecord, ok bool, err error)
	// Topics lists every topic.
	Topics(ctx context.Context) ([]TopicRecord, error)
	// CreateTopic creates a topic with a fresh incarnation id; an existing
	// one is returned as it is, with created false.
	CreateTopic(ctx context.Context, name string, partitions int, retentionMs int64) (rec TopicRecord, created bool, err error)
	// SetRetention changes a topic's retention, keeping its incarnation.
	SetRetention(ctx context.Context, name string, retentionMs int64) (TopicRecord, error)
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
	// no longer exists (the record is absent or carries another id).
	IncarnationGone(ctx context.Context, name string, id wire.IncarnationID) (bool, error)
}

// ErrTopicNotFound: no topic of that name.
var ErrTopicNotFound = errors.New("runtime: topic not found")

// metastoreFile is the embedded metastore's file under the data directory:
// never inside topics/, so the records the markers are checked against
// live apart from what they check.
const metastoreFile = "metastore.json"

// maxMetastoreBytes bounds what the embedded metastore reads back.
const maxMetastoreBytes = 64 << 20

// LocalMetastore is the embedded single-node metastore, the daemon's
// default: every partition is assigned to this node, the replica is always
// caught up, and the records persist in one JSON file written crash-safely
// (temporary file, fsync, rename, directory fsync; through fsys).
//
// Invariants, under mu: topics is what the file holds; version is the
// highest Version any record ever had, so versions never repeat.
type LocalMetastore struct {
	fs   fsys.FS
	path string

	mu      sync.Mutex
	topics  map[string]TopicRecord
	version uint64
	subs    map[int]func(string)
	nextSub int
}

type metastoreState struct {
	Version uint64        `json:"version"`
	Topics  []TopicRecord `json:"topics"`
}

// OpenLocalMetastore loads (or starts) the embedded metastore in dataDir.
func OpenLocalMetastore(files fsys.FS, dataDir string) (*LocalMetastore, error) {
	m := &LocalMetastore{fs: files, path: filepath.Join(dataDir, metastoreFile), topics: map[string]TopicRecord{}, subs: map[int]func(string){}}
	b, err := fsys.ReadFile(files, m.path, maxMetastoreBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metastore: %w", err)
	}
	var st metastoreState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("metastore %s: %w", m.path, err)
	}
	m.version = st.Version
	for _, t := range st.Topics {
		m.topics[t.Name] = t
	}
	return m, nil
}

func (m *LocalMetastore) saveLocked() error {
	st := metastoreState{Version: m.version}
	for _, t := range m.topics {
		st.Topics = append(st.Topics, t)
	}
	sort.Slice(st.Topics, func(i, j int) bool { return st.Topics[i].Name < st.Topics[j].Name })
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return fsys.WriteFileAtomic(m.fs, m.path, b)
}

// Topic implements Metastore.
func (m *LocalMetastore) Topic(_ context.Context, name string) (TopicRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.topics[name]
	return t, ok, nil
}

// Topics implements Metastore.
func (m *LocalMetastore) Topics(context.Context) ([]TopicRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]TopicRecord, 0, len(m.topics))
	for _, t := range m.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CreateTopic implements Metastore.
func (m *LocalMetastore) CreateTopic(_ context.Context, name string, partitions int, retentionMs int64) (TopicRecord, bool, error) {
	m.mu.Lock()
	if t, ok := m.topics[name]; ok {
		m.mu.Unlock()
		return t, false, nil
	}
	id, err := wire.NewIncarnationID(rand.Reader)
	if err != nil {
		m.mu.Unlock()
		return TopicRecord{}, false, err
	}
	m.version++
	t := TopicRecord{Name: name, Incarnation: id, Partitions: partitions, RetentionMs: retentionMs, Version: m.version}
	m.topics[name] = t
	if err := m.saveLocked(); err != nil {
		delete(m.topics, name)
		m.mu.Unlock()
		return TopicRecord{}, false, fmt.Errorf("metastore: create %s: %w", name, err)
	}
	subs := m.subscribersLocked()
	m.mu.Unlock()
	notify(subs, name)
	return t, true, nil
}

// SetRetention implements Metastore.
func (m *LocalMetastore) SetRetention(_ context.Context, name string, retentionMs int64) (TopicRecord, error) {
	m.mu.Lock()
	old, ok := m.topics[name]
	if !ok {
		m.mu.Unlock()
		return TopicRecord{}, fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	m.version++
	t := old
	t.RetentionMs, t.Version = retentionMs, m.version
	m.topics[name] = t
	if err := m.saveLocked(); err != nil {
		m.topics[name] = old
		m.mu.Unlock()
		return TopicRecord{}, fmt.Errorf("metastore: retention of %s: %w", name, err)
	}
	subs := m.subscribersLocked()
	m.mu.Unlock()
	notify(subs, name)
	return t, nil
}

// DeleteTopic implements Metastore.
func (m *LocalMetastore) DeleteTopic(_ context.Context, name string) error {
	m.mu.Lock()
	old, ok := m.topics[name]
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	m.version++
	delete(m.topics, name)
	if err := m.saveLocked(); err != nil {
		m.topics[name] = old
		m.mu.Unlock()
		return fmt.Errorf("metastore: delete %s: %w", name, err)
	}
	subs := m.subscribersLocked()
	m.mu.Unlock()
	notify(subs, name)
	return nil
}

// Assigned implements Metastore: a single node owns every partition of
// every topic it knows.
func (m *LocalMetastore) Assigned(_ context.Context, topic string, partition int) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.topics[topic]
	return ok && partition >= 0 && partition < t.Partitions, nil
}

// CaughtUp implements Metastore: the embedded store is its own leader.
func (m *LocalMetastore) CaughtUp() bool { return true }

// IncarnationGone implements Metastore.
func (m *LocalMetastore) IncarnationGone(_ context.Context, name string, id wire.IncarnationID) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.topics[name]
	return !ok || t.Incarnation != id, nil
}

// Subscribe implements Metastore.
func (m *LocalMetastore) Subscribe(f func(topic string)) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.nextSub
	m.nextSub++
	m.subs[id] = f
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.subs, id)
	}
}

func (m *LocalMetastore) subscribersLocked() []func(string) {
	out := make([]func(string), 0, len(m.subs))
	for _, f := range m.subs {
		out = append(out, f)
	}
	return out
}

func notify(subs []func(string), topic string) {
	for _, f := range subs {
		f(topic)
	}
}
