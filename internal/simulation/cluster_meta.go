package simulation

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
)

// clusterMeta is the metastore the members of a cluster run share: the
// topics' records and each partition's owner, in memory, every call
// linearizable (a fake of the cluster's etcd: no consensus, no replica
// lag, nothing lost by a member's crash). Each member sees it through a
// memberMeta, whose Assigned answers for that member. Its change feed is
// the run's (settle.go): every change's notification reaches every
// member's subscribers between operations.
//
// Invariants, under mu: owner holds a key for every partition of every
// topic in topics, "" while a move froze it (no member serves it); a
// topic's Version moves at every change of its record.
type clusterMeta struct {
	mu      sync.Mutex
	topics  map[string]runtime.TopicRecord
	owner   map[partKey]string
	version uint64
	ids     io.Reader // incarnation ids, drawn from the run
	subs    map[int]func(string)
	nextSub int
	feed    *feed
	place   string // the member CreateTopic gives a new topic's partitions
}

// partKey names one partition.
type partKey struct {
	topic string
	p     int
}

func newClusterMeta(ids io.Reader, f *feed) *clusterMeta {
	return &clusterMeta{topics: map[string]runtime.TopicRecord{}, owner: map[partKey]string{}, ids: ids, subs: map[int]func(string){}, feed: f}
}

// ownerOf is the partition's owner, "" while frozen or unknown.
func (m *clusterMeta) ownerOf(topic string, p int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owner[partKey{topic, p}]
}

// setOwner gives the partition to member id ("": frozen by a move) and
// notifies every member's subscribers of the topic's change, as the
// cluster's replica does at a change of an assignment (each node's
// recheck then opens or closes what it now owns or not).
func (m *clusterMeta) setOwner(topic string, p int, id string) {
	m.mu.Lock()
	m.owner[partKey{topic, p}] = id
	notify := m.notifyLocked(topic)
	m.mu.Unlock()
	notify()
}

// notifyLocked returns what hands the change of topic to the feed, one
// notification per subscriber; the caller runs it once it holds no lock.
func (m *clusterMeta) notifyLocked(topic string) func() {
	ids := make([]int, 0, len(m.subs))
	for id := range m.subs {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	subs := make([]func(string), len(ids))
	for i, id := range ids {
		subs[i] = m.subs[id]
	}
	return func() {
		for _, f := range subs { // one at a time: each member's recheck runs alone (settle.go)
			m.feed.deliver(func() { f(topic) })
		}
	}
}

// memberMeta is one member's view of the shared metastore.
type memberMeta struct {
	m  *clusterMeta
	id string
}

var _ runtime.Metastore = memberMeta{}

// Topic implements runtime.Metastore.
func (v memberMeta) Topic(_ context.Context, name string) (runtime.TopicRecord, bool, error) {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	t, ok := v.m.topics[name]
	return t, ok, nil
}

// Topics implements runtime.Metastore.
func (v memberMeta) Topics(context.Context) ([]runtime.TopicRecord, error) {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	out := make([]runtime.TopicRecord, 0, len(v.m.topics))
	for _, t := range v.m.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CreateTopic implements runtime.Metastore: every partition goes to the
// member the run placed the topic on.
func (v memberMeta) CreateTopic(_ context.Context, name string, partitions int, retention runtime.Retention) (runtime.TopicRecord, bool, error) {
	v.m.mu.Lock()
	if t, ok := v.m.topics[name]; ok {
		v.m.mu.Unlock()
		return t, false, nil
	}
	id, err := wire.NewIncarnationID(v.m.ids)
	if err != nil {
		v.m.mu.Unlock()
		return runtime.TopicRecord{}, false, err
	}
	v.m.version++
	t := runtime.TopicRecord{Name: name, Incarnation: id, Partitions: partitions, RetentionMs: retention.Ms, RetentionBytes: retention.Bytes, Version: v.m.version}
	v.m.topics[name] = t
	for p := range partitions {
		v.m.owner[partKey{name, p}] = v.m.place
	}
	notify := v.m.notifyLocked(name)
	v.m.mu.Unlock()
	notify()
	return t, true, nil
}

// UpdateRetention implements runtime.Metastore.
func (v memberMeta) UpdateRetention(_ context.Context, name string, change func(runtime.Retention) (runtime.Retention, error)) (runtime.TopicRecord, error) {
	v.m.mu.Lock()
	t, ok := v.m.topics[name]
	if !ok {
		v.m.mu.Unlock()
		return runtime.TopicRecord{}, fmt.Errorf("%w: %s", runtime.ErrTopicNotFound, name)
	}
	ret, err := change(t.Retention())
	if err != nil {
		v.m.mu.Unlock()
		return runtime.TopicRecord{}, err
	}
	v.m.version++
	t.RetentionMs, t.RetentionBytes, t.Version = ret.Ms, ret.Bytes, v.m.version
	v.m.topics[name] = t
	notify := v.m.notifyLocked(name)
	v.m.mu.Unlock()
	notify()
	return t, nil
}

// SetDictionaryAfter implements runtime.Metastore.
func (v memberMeta) SetDictionaryAfter(_ context.Context, name string, records int64) (runtime.TopicRecord, error) {
	v.m.mu.Lock()
	t, ok := v.m.topics[name]
	if !ok {
		v.m.mu.Unlock()
		return runtime.TopicRecord{}, fmt.Errorf("%w: %s", runtime.ErrTopicNotFound, name)
	}
	v.m.version++
	t.DictionaryAfter, t.Version = records, v.m.version
	v.m.topics[name] = t
	notify := v.m.notifyLocked(name)
	v.m.mu.Unlock()
	notify()
	return t, nil
}

// DeleteTopic implements runtime.Metastore.
func (v memberMeta) DeleteTopic(_ context.Context, name string) error {
	v.m.mu.Lock()
	t, ok := v.m.topics[name]
	if !ok {
		v.m.mu.Unlock()
		return fmt.Errorf("%w: %s", runtime.ErrTopicNotFound, name)
	}
	v.m.version++
	delete(v.m.topics, name)
	for p := range t.Partitions {
		delete(v.m.owner, partKey{name, p})
	}
	notify := v.m.notifyLocked(name)
	v.m.mu.Unlock()
	notify()
	return nil
}

// Assigned implements runtime.Metastore: the member owns what the shared
// owners say it does.
func (v memberMeta) Assigned(_ context.Context, topic string, p int) (bool, error) {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	return v.m.owner[partKey{topic, p}] == v.id, nil
}

// Subscribe implements runtime.Metastore.
func (v memberMeta) Subscribe(f func(topic string)) func() {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	id := v.m.nextSub
	v.m.nextSub++
	v.m.subs[id] = f
	return func() {
		v.m.mu.Lock()
		defer v.m.mu.Unlock()
		delete(v.m.subs, id)
	}
}

// CaughtUp implements runtime.Metastore: no replica lags.
func (v memberMeta) CaughtUp() bool { return true }

// IncarnationGone implements runtime.Metastore.
func (v memberMeta) IncarnationGone(_ context.Context, name string, id wire.IncarnationID) (bool, error) {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	t, ok := v.m.topics[name]
	if id == "" {
		return !ok, nil
	}
	return !ok || t.Incarnation != id, nil
}
