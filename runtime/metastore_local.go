package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// metastoreFile is the embedded metastore's file under the data directory:
// never inside topics/, so the records the markers are checked against
// live apart from what they check. metastoreCopy is its second copy,
// written after it at every change: a single lost write (a lying fsync)
// or damaged file leaves the other, and since a change returns only once
// both are written, the copy used is never older than a change that
// returned.
const (
	metastoreFile = "metastore.json"
	metastoreCopy = "metastore.json.copy"
)

// maxMetastoreBytes bounds what the embedded metastore reads back.
const maxMetastoreBytes = 64 << 20

// ServedAlone reports whether the data directory has served a node alone:
// it holds the embedded metastore's file or its copy. A cluster's node
// never takes such a directory (package datadir says why).
func ServedAlone(files vfs.FS, dir string) (bool, error) {
	if files == nil {
		files = vfs.OS{}
	}
	for _, name := range []string{metastoreFile, metastoreCopy} {
		ok, err := vfs.Exists(files, filepath.Join(dir, name))
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// LocalMetastore is the embedded single-node metastore, the daemon's
// default: every partition is assigned to this node, the replica is always
// caught up, and the records persist in a JSON file written crash-safely
// (temporary file, fsync, rename, directory fsync; through fsys),
// checksummed (a damaged file is ErrMetastoreDamaged, never misread) and
// written twice (metastoreCopy).
//
// Invariants, under mu: topics is what the file holds; version is the
// highest Version any record ever had, so versions never repeat.
type LocalMetastore struct {
	fs        vfs.FS
	path      string
	recovered string    // set once, at open
	broken    error     // set when a change could not be taken back on disk; under mu
	ids       io.Reader // incarnation ids' randomness; nil is crypto/rand; under mu
	// brokenFlag is broken != nil, for the produce path.
	brokenFlag atomic.Bool

	mu      sync.Mutex
	topics  map[string]TopicRecord
	version uint64
	subs    map[int]func(string)
	nextSub int
	deliver func(notify func()) // the change feed's delivery; nil: at once
}

type metastoreState struct {
	Version uint64        `json:"version"`
	Topics  []TopicRecord `json:"topics"`
}

// OpenLocalMetastore loads (or starts) the embedded metastore in dataDir:
// from whichever of its file and the copy decodes with the higher
// version (a lost write of the file may leave it holding an older valid
// state, e.g. a leftover temporary file's, while the copy holds the
// change that returned), the file on a tie. A nil files is the real file
// system.
func OpenLocalMetastore(files vfs.FS, dataDir string) (*LocalMetastore, error) {
	if files == nil {
		files = vfs.OS{}
	}
	m := &LocalMetastore{fs: files, path: filepath.Join(dataDir, metastoreFile), topics: map[string]TopicRecord{}, subs: map[int]func(string){}}
	copyPath := filepath.Join(dataDir, metastoreCopy)
	st, found, err := loadMetastore(files, m.path)
	copySt, copyFound, copyErr := loadMetastore(files, copyPath)
	ioErr := func(err error) bool { return err != nil && !errors.Is(err, ErrMetastoreDamaged) }
	switch {
	case ioErr(err) && copyFound:
		// The file cannot be read; the copy, written after it, holds
		// every change that returned.
		m.recovered = fmt.Sprintf("%v; loaded its copy %s", err, copyPath)
		st = copySt
	case ioErr(copyErr) && found:
		m.recovered = fmt.Sprintf("%v; loaded %s", copyErr, m.path)
	case ioErr(err) || ioErr(copyErr):
		return nil, errors.Join(err, copyErr) // the disk's error, not the files': try again later
	case !found && !copyFound && (err != nil || copyErr != nil):
		// Both damaged, or one damaged and the other never written: lost
		// writes (lying fsyncs) or damage took every copy of the records.
		// Rebuild them from the topic directories rather than refuse to
		// start, or start empty and let a sweep purge the directories.
		rebuilt, names, rerr := rebuildFromTopicDirs(files, dataDir)
		if rerr != nil {
			return nil, errors.Join(err, copyErr, rerr)
		}
		st = rebuilt
		m.recovered = fmt.Sprintf("%v; rebuilt %d topic records from the topic directories (%v): "+
			"their retention is keep-forever until set again", errors.Join(err, copyErr), len(names), names)
	case copyFound && (!found || copySt.Version > st.Version):
		if err != nil {
			// Logged by the node, which has the logger: the copy served.
			m.recovered = fmt.Sprintf("%v; loaded its copy %s", err, copyPath)
		} else if found {
			m.recovered = fmt.Sprintf("metastore %s holds version %d, its copy %d: loaded the copy", m.path, st.Version, copySt.Version)
		}
		st = copySt
	}
	// A change in flight at a crash may have written the next version to
	// a temporary file: never reuse it, so the higher version always wins.
	m.version = max(st.Version, copySt.Version) + 1
	for _, t := range st.Topics {
		m.topics[t.Name] = t
	}
	return m, nil
}

// rebuildFromTopicDirs makes a record for every topic directory: its name,
// its marker's incarnation (none when neither marker file decodes), as
// many partitions as its highest partition directory says, and retention
// 0 (keep forever: a rebuilt record must never delete what its lost
// setting would have kept).
func rebuildFromTopicDirs(files vfs.FS, dataDir string) (st metastoreState, names []string, err error) {
	topics := filepath.Join(dataDir, wire.TopicsDirName)
	entries, err := files.ReadDir(topics)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil, nil
	}
	if err != nil {
		return st, nil, fmt.Errorf("rebuild the metastore: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir || wire.ValidateTopicName(e.Name) != nil {
			continue // a quarantined directory, or something not ours
		}
		dir := filepath.Join(topics, e.Name)
		id, err := readMarker(files, dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, wire.ErrCorrupt) {
			return st, nil, fmt.Errorf("rebuild the metastore: %w", err)
		}
		parts, err := files.ReadDir(dir)
		if err != nil {
			return st, nil, fmt.Errorf("rebuild the metastore: %w", err)
		}
		partitions := 1
		for _, p := range parts {
			if i, err := wire.ParsePartitionDirName(p.Name); err == nil && p.IsDir {
				partitions = max(partitions, i+1)
			}
		}
		st.Version++
		st.Topics = append(st.Topics, TopicRecord{Name: e.Name, Incarnation: id, Partitions: partitions, Version: st.Version})
		names = append(names, e.Name)
	}
	return st, names, nil
}

// loadMetastore reads one of the metastore's files; found is false when
// it does not exist.
func loadMetastore(files vfs.FS, path string) (st metastoreState, found bool, err error) {
	b, err := vfs.ReadFile(files, path, maxMetastoreBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("metastore: %w", err)
	}
	if st, err = decodeMetastore(b); err != nil {
		return st, false, fmt.Errorf("metastore %s: %w", path, err)
	}
	return st, true, nil
}

// SetIncarnationSource makes new incarnation ids from r instead of
// crypto/rand: for tests that replay a run byte for byte (a crash
// campaign's states are named by their seed). Never for a real node: ids
// must not repeat across a node's life.
func (m *LocalMetastore) SetIncarnationSource(r io.Reader) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids = r
}

// Recovered says, when the metastore's file was damaged and its copy
// served, what was wrong; empty otherwise.
func (m *LocalMetastore) Recovered() string { return m.recovered }

// restoreLocked follows a failed save, the change already taken back in
// memory: the save may have left the file holding the change (at a
// version above the copy's, which a load prefers), so the restored state
// is saved again at a fresh version. A crash would otherwise apply a
// change the caller was told failed: a failed delete would purge records
// acked after it. If that fails too, the metastore refuses every change
// until it is opened again (errMetastoreBroken). It returns the error
// to report.
func (m *LocalMetastore) restoreLocked(cause error) error {
	if m.broken != nil {
		return m.broken // already refusing: nothing was written
	}
	m.version++
	if err := m.saveLocked(); err != nil {
		m.broken = fmt.Errorf("%w: %w; restoring the state before it: %w", ErrMetastoreBroken, cause, err)
		m.brokenFlag.Store(true)
		return m.broken
	}
	return cause
}

// Broken reports whether a failed change could not be taken back on disk
// (ErrMetastoreBroken): the files may then hold a change memory does not,
// which a crash would apply, so the node refuses produces until reopened
// rather than ack records a failed delete may take with it. Lock-free:
// the produce path asks.
func (m *LocalMetastore) Broken() bool { return m.brokenFlag.Load() }

// ErrMetastoreBroken: a save failed and so did the save that restores the
// state before it; the files may hold a change memory does not. Every
// change, and every produce of the node, is refused until it is reopened.
var ErrMetastoreBroken = errors.New("metastore: a failed change could not be taken back on disk; reopen the node")

func (m *LocalMetastore) saveLocked() error {
	if m.broken != nil {
		return m.broken
	}
	st := metastoreState{Version: m.version}
	for _, t := range m.topics {
		st.Topics = append(st.Topics, t)
	}
	sort.Slice(st.Topics, func(i, j int) bool { return st.Topics[i].Name < st.Topics[j].Name })
	b, err := encodeMetastore(st)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(m.fs, m.path, b); err != nil {
		return err
	}
	return vfs.WriteFileAtomic(m.fs, filepath.Join(filepath.Dir(m.path), metastoreCopy), b)
}

// ErrMetastoreDamaged: the embedded metastore's file fails its checksum
// or does not parse. The node refuses to start on it rather than act on
// records a damaged byte may have changed (a retention bound, an
// incarnation id): restore the file, or recreate the topics.
var ErrMetastoreDamaged = errors.New("runtime: metastore file damaged")

// metastoreFileFormat is the file as written: the state's JSON and the
// CRC-32C of exactly those bytes, so that a damaged byte anywhere is
// found, never read as a different record.
type metastoreFileFormat struct {
	CRC32C string          `json:"crc32c"`
	State  json.RawMessage `json:"state"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeMetastore(st metastoreState) ([]byte, error) {
	state, err := json.MarshalIndent(st, "  ", "  ")
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "{\n  \"crc32c\": \"%08x\",\n  \"state\": %s\n}\n", crc32.Checksum(state, castagnoli), state), nil
}

func decodeMetastore(b []byte) (metastoreState, error) {
	var st metastoreState
	// encoding/json matches keys case-insensitively: take the two keys
	// exactly, so a flipped case bit in one is damage too.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return st, fmt.Errorf("%w: %v", ErrMetastoreDamaged, err)
	}
	var f metastoreFileFormat
	if len(fields) != 2 || fields["crc32c"] == nil || fields["state"] == nil {
		return st, fmt.Errorf("%w: want exactly the keys crc32c and state", ErrMetastoreDamaged)
	}
	if err := json.Unmarshal(fields["crc32c"], &f.CRC32C); err != nil {
		return st, fmt.Errorf("%w: crc32c: %v", ErrMetastoreDamaged, err)
	}
	f.State = fields["state"]
	if want := fmt.Sprintf("%08x", crc32.Checksum(f.State, castagnoli)); f.CRC32C != want {
		return st, fmt.Errorf("%w: checksum %q, the state's is %s", ErrMetastoreDamaged, f.CRC32C, want)
	}
	dec := json.NewDecoder(bytes.NewReader(f.State))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return st, fmt.Errorf("%w: %v", ErrMetastoreDamaged, err)
	}
	return st, nil
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
func (m *LocalMetastore) CreateTopic(_ context.Context, name string, partitions int, retention Retention) (TopicRecord, bool, error) {
	m.mu.Lock()
	if t, ok := m.topics[name]; ok {
		m.mu.Unlock()
		return t, false, nil
	}
	ids := m.ids
	if ids == nil {
		ids = rand.Reader
	}
	id, err := wire.NewIncarnationID(ids)
	if err != nil {
		m.mu.Unlock()
		return TopicRecord{}, false, err
	}
	m.version++
	t := TopicRecord{Name: name, Incarnation: id, Partitions: partitions, RetentionMs: retention.Ms, RetentionBytes: retention.Bytes, Version: m.version}
	m.topics[name] = t
	if err := m.saveLocked(); err != nil {
		delete(m.topics, name)
		err = m.restoreLocked(err)
		m.mu.Unlock()
		return TopicRecord{}, false, fmt.Errorf("metastore: create %s: %w", name, err)
	}
	feed := m.feedLocked(name)
	m.mu.Unlock()
	feed()
	return t, true, nil
}

// SetRetention sets a topic's retention bounds, both of them.
func (m *LocalMetastore) SetRetention(ctx context.Context, name string, retention Retention) (TopicRecord, error) {
	return m.UpdateRetention(ctx, name, func(Retention) (Retention, error) { return retention, nil })
}

// UpdateRetention implements Metastore: change runs under the metastore's
// lock.
func (m *LocalMetastore) UpdateRetention(_ context.Context, name string, change func(Retention) (Retention, error)) (TopicRecord, error) {
	m.mu.Lock()
	old, ok := m.topics[name]
	if !ok {
		m.mu.Unlock()
		return TopicRecord{}, fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	retention, err := change(old.Retention())
	if err != nil {
		m.mu.Unlock()
		return TopicRecord{}, err
	}
	m.version++
	t := old
	t.RetentionMs, t.RetentionBytes, t.Version = retention.Ms, retention.Bytes, m.version
	m.topics[name] = t
	if err := m.saveLocked(); err != nil {
		m.topics[name] = old
		err = m.restoreLocked(err)
		m.mu.Unlock()
		return TopicRecord{}, fmt.Errorf("metastore: retention of %s: %w", name, err)
	}
	feed := m.feedLocked(name)
	m.mu.Unlock()
	feed()
	return t, nil
}

// SetDictionaryAfter implements Metastore.
func (m *LocalMetastore) SetDictionaryAfter(_ context.Context, name string, records int64) (TopicRecord, error) {
	m.mu.Lock()
	old, ok := m.topics[name]
	if !ok {
		m.mu.Unlock()
		return TopicRecord{}, fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	m.version++
	t := old
	t.DictionaryAfter, t.Version = records, m.version
	m.topics[name] = t
	if err := m.saveLocked(); err != nil {
		m.topics[name] = old
		err = m.restoreLocked(err)
		m.mu.Unlock()
		return TopicRecord{}, fmt.Errorf("metastore: dictionary option of %s: %w", name, err)
	}
	feed := m.feedLocked(name)
	m.mu.Unlock()
	feed()
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
		err = m.restoreLocked(err)
		m.mu.Unlock()
		return fmt.Errorf("metastore: delete %s: %w", name, err)
	}
	feed := m.feedLocked(name)
	m.mu.Unlock()
	feed()
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
	if id == "" {
		return !ok, nil
	}
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

// SetFeedDelivery hands each change's notification of the subscribers to
// deliver rather than running it at once, for a simulator that runs the
// node's reaction to a change at a point of its choosing (after the call
// that made the change returns), so that a run replays exactly. deliver
// may call notify at once, later or never; nil runs it at once. The feed
// promises nothing about when a subscriber hears of a change (a cluster's
// metastore tells it over the network), so a late delivery is one the
// node must bear anyway. deliver runs on the goroutine that made the
// change, outside every lock, and may be called by several at once;
// notify tells the subscribers of the moment of the change, including
// any that unsubscribed since (a Node checks that it is closed first).
func (m *LocalMetastore) SetFeedDelivery(deliver func(notify func())) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deliver = deliver
}

// feedLocked returns what tells the subscribers of now that topic changed,
// through the delivery set; the caller runs it once it holds no lock.
func (m *LocalMetastore) feedLocked(topic string) func() {
	subs := make([]func(string), 0, len(m.subs))
	for _, id := range slices.Sorted(maps.Keys(m.subs)) {
		subs = append(subs, m.subs[id])
	}
	notify := func() {
		for _, f := range subs {
			f(topic)
		}
	}
	if deliver := m.deliver; deliver != nil {
		return func() { deliver(notify) }
	}
	return notify
}
