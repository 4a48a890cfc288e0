package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// partitionKey names one partition of a topic.
type partitionKey struct {
	topic     string
	partition int
}

// replica is an EtcdMetastore's copy in memory of the records under the
// prefix, which Topic, Topics, Assigned, Owner, Locate and Subscribe
// serve: reload makes it what a read of the prefix saw, follow then
// applies each change the watch of the prefix reports, from the revision
// after the one applied, and checkProgress says whether it is caught up.
// EtcdMetastore embeds it, so its fields read as the metastore's.
//
// Invariants, under mu:
//   - topics, owners, members, moves, drains and lost are what etcd held
//     under the prefix at revision applied;
//   - applied never decreases;
//   - advanced is closed and replaced whenever applied moves.
type replica struct {
	mu       sync.Mutex
	topics   map[string]runtime.TopicRecord
	owners   map[partitionKey]string
	members  map[string]MemberInfo
	moves    map[partitionKey]Move
	drains   map[string]bool
	lost     map[string]bool // the nodes marked lost (lost.go)
	applied  int64
	advanced chan struct{}
	subs     map[int]func(string)
	nextSub  int

	caughtUp  atomic.Bool
	cuMu      sync.Mutex
	cuChanged chan struct{} // closed and replaced when caughtUp changes; under cuMu
}

// CatchUp brings the replica up to what etcd holds now: a linearizable
// read of etcd's revision, then a wait, until ctx ends, for the watch to
// apply it. What another node saw in etcd before the call, the replica
// holds after it.
func (m *EtcdMetastore) CatchUp(ctx context.Context) error {
	resp, err := m.cli.Get(ctx, m.keys.root+"settle") // any key: the header carries etcd's revision
	if err != nil {
		return fmt.Errorf("cluster: read etcd's revision: %w", err)
	}
	return m.waitApplied(ctx, resp.Header.Revision)
}

// Settle brings the replica up to what etcd holds now (CatchUp), then
// waits while the partition has no owner, until ctx ends: a node asked
// for a partition of a topic another node just made answers from the
// record and the assignment, not from its watch's delay. It reports
// whether the partition has an owner.
func (m *EtcdMetastore) Settle(ctx context.Context, topic string, partition int) bool {
	if m.CatchUp(ctx) != nil {
		return false
	}
	for {
		m.mu.Lock()
		rec, known := m.topics[topic]
		_, owned := m.owners[partitionKey{topic, partition}]
		advanced := m.advanced
		m.mu.Unlock()
		if owned || !known || partition >= rec.Partitions {
			return owned
		}
		select {
		case <-advanced:
		case <-m.closed:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// CaughtUp implements runtime.Metastore.
func (m *EtcdMetastore) CaughtUp() bool { return m.caughtUp.Load() }

// CaughtUpChanged returns a channel closed at CaughtUp's next change: a
// caller takes it, then reads CaughtUp, and waits on it for a change.
func (m *EtcdMetastore) CaughtUpChanged() <-chan struct{} {
	m.cuMu.Lock()
	defer m.cuMu.Unlock()
	return m.cuChanged
}

func (m *EtcdMetastore) setCaughtUp(v bool) {
	if m.caughtUp.Swap(v) == v {
		return
	}
	m.cuMu.Lock()
	close(m.cuChanged)
	m.cuChanged = make(chan struct{})
	m.cuMu.Unlock()
}

// Subscribe implements runtime.Metastore: f hears the name of every topic
// whose record or assignment the replica sees change, on the watch's
// goroutine; f must not block.
func (m *EtcdMetastore) Subscribe(f func(topic string)) (cancel func()) {
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

// waitApplied waits until the replica has applied revision rev, so a
// change its caller made is what the replica serves next.
func (m *EtcdMetastore) waitApplied(ctx context.Context, rev int64) error {
	for {
		m.mu.Lock()
		applied, advanced := m.applied, m.advanced
		m.mu.Unlock()
		if applied >= rev {
			return nil
		}
		select {
		case <-advanced:
		case <-m.closed:
			return fmt.Errorf("cluster: the change is in etcd at revision %d, but the metastore closed before its replica had it", rev)
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for the replica to reach revision %d (at %d): %w", rev, applied, ctx.Err())
		}
	}
}

// reload reads every record under the prefix and makes the replica what
// it read, telling subscribers about every topic that differs.
func (m *EtcdMetastore) reload(ctx context.Context) error {
	resp, err := m.cli.Get(ctx, m.keys.root, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("cluster: read %s: %w", m.keys.root, err)
	}
	topics := map[string]runtime.TopicRecord{}
	owners := map[partitionKey]string{}
	members := map[string]MemberInfo{}
	moves := map[partitionKey]Move{}
	drains, lost := map[string]bool{}, map[string]bool{}
	for _, kv := range resp.Kvs {
		switch kind, id, _ := m.keys.parse(string(kv.Key)); kind {
		case keyDrain:
			drains[id] = true
			continue
		case keyLost:
			lost[id] = true
			continue
		}
		m.decodeInto(topics, owners, members, moves, string(kv.Key), kv.Value, kv.ModRevision)
	}
	m.mu.Lock()
	changed := map[string]bool{}
	for name, rec := range topics {
		if old, ok := m.topics[name]; !ok || old != rec {
			changed[name] = true
		}
	}
	for name := range m.topics {
		if _, ok := topics[name]; !ok {
			changed[name] = true
		}
	}
	for k, node := range owners {
		if m.owners[k] != node {
			changed[k.topic] = true
		}
	}
	for k := range m.owners {
		if _, ok := owners[k]; !ok {
			changed[k.topic] = true
		}
	}
	for k, mv := range moves {
		if m.moves[k] != mv {
			changed[k.topic] = true
		}
	}
	for k := range m.moves {
		if _, ok := moves[k]; !ok {
			changed[k.topic] = true
		}
	}
	m.topics, m.owners, m.members, m.moves, m.drains, m.lost = topics, owners, members, moves, drains, lost
	subs := m.advanceLocked(resp.Header.Revision)
	m.mu.Unlock()
	for name := range changed {
		notify(subs, name)
	}
	return nil
}

// decodeInto puts the record at key into topics, owners or members; a
// topic or member record it cannot read is logged and taken out.
func (m *EtcdMetastore) decodeInto(topics map[string]runtime.TopicRecord, owners map[partitionKey]string, members map[string]MemberInfo,
	moves map[partitionKey]Move, key string, value []byte, modRev int64) {
	switch kind, name, p := m.keys.parse(key); kind {
	case keyTopic:
		rec, err := decodeTopic(name, value, modRev)
		if err != nil { // no record this node can read: no topic it serves
			m.logger.Error("unreadable topic record left out", zap.String("key", key), zap.Error(err))
			delete(topics, name)
			return
		}
		topics[name] = rec
	case keyAssignment:
		owners[partitionKey{name, p}] = string(value)
	case keyMember:
		var info MemberInfo
		if err := json.Unmarshal(value, &info); err != nil || info.ID != name {
			m.logger.Error("unreadable member record left out", zap.String("key", key), zap.Error(err))
			delete(members, name)
			return
		}
		members[name] = info
	case keyMove:
		var mv Move
		if err := json.Unmarshal(value, &mv); err != nil || mv.Topic != name || mv.Partition != p {
			m.logger.Error("unreadable move record left out", zap.String("key", key), zap.Error(err))
			delete(moves, partitionKey{name, p})
			return
		}
		mv.Rev = modRev
		moves[partitionKey{name, p}] = mv
	}
}

// follow keeps the replica following etcd: a watch of the prefix from the
// revision after the one applied; when it ends (a compaction it missed, a
// lost leader, etcd unreachable) a fresh read of the prefix, then a new
// watch.
func (m *EtcdMetastore) follow(ctx context.Context) {
	defer m.done.Done()
	for ctx.Err() == nil {
		m.mu.Lock()
		from := m.applied + 1
		m.mu.Unlock()
		watchCtx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range m.cli.Watch(watchCtx, m.keys.root, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify()) {
			if err := resp.Err(); err != nil || resp.Canceled {
				m.logger.Info("etcd watch ended; reading the records again", zap.Error(err))
				break
			}
			// The revision applied is the last event's: a watch that catches
			// up sends its backlog in batches, each headed with etcd's
			// current revision, not the batch's (found by review). A
			// progress notification, sent only to a watch that has caught
			// up, carries the revision it has seen everything to.
			rev := resp.Header.Revision
			if n := len(resp.Events); n > 0 {
				rev = resp.Events[n-1].Kv.ModRevision
			}
			m.apply(resp.Events, rev)
		}
		cancel()
		for ctx.Err() == nil {
			readCtx, cancel := context.WithTimeout(ctx, max(10*m.interval, time.Minute)) // a large prefix takes seconds
			err := m.reload(readCtx)
			cancel()
			if err == nil {
				break
			}
			m.logger.Warn("reading the records from etcd failed; retrying", zap.Error(err))
			select {
			case <-ctx.Done():
			case <-time.After(m.interval):
			}
		}
	}
}

// apply applies a watch response's events, then moves applied to rev (a
// progress notification has no events and moves it all the same).
func (m *EtcdMetastore) apply(events []*clientv3.Event, rev int64) {
	changed := map[string]bool{}
	m.mu.Lock()
	for _, ev := range events {
		key := string(ev.Kv.Key)
		kind, name, p := m.keys.parse(key)
		if kind == keyOther || kind == keyFence { // a fence horizon changes no topic
			continue
		}
		if kind == keyDrain || kind == keyLost {
			marks := m.drains
			if kind == keyLost {
				marks = m.lost
			}
			if ev.Type == clientv3.EventTypeDelete {
				delete(marks, name)
			} else {
				marks[name] = true
			}
			continue
		}
		if kind != keyMember {
			changed[name] = true // a member's comings and goings change no topic
		}
		if ev.Type == clientv3.EventTypeDelete {
			switch kind {
			case keyTopic:
				delete(m.topics, name)
			case keyAssignment:
				delete(m.owners, partitionKey{name, p})
			case keyMember:
				delete(m.members, name)
			case keyMove:
				delete(m.moves, partitionKey{name, p})
			}
			continue
		}
		m.decodeInto(m.topics, m.owners, m.members, m.moves, key, ev.Kv.Value, ev.Kv.ModRevision)
	}
	subs := m.advanceLocked(rev)
	m.mu.Unlock()
	for name := range changed {
		notify(subs, name)
	}
}

// advanceLocked moves applied to rev (never back) and returns the
// subscribers to tell.
func (m *EtcdMetastore) advanceLocked(rev int64) []func(string) {
	if rev > m.applied {
		m.applied = rev
		close(m.advanced)
		m.advanced = make(chan struct{})
	}
	subs := make([]func(string), 0, len(m.subs))
	for _, f := range m.subs {
		subs = append(subs, f)
	}
	return subs
}

// checkProgress keeps CaughtUp true while the replica has applied, by
// each check, the revision etcd was at one check before: every interval
// it reads etcd's current revision (a linearizable read of a key nobody
// writes) and asks the watch for a progress notification, which moves
// applied there even when nothing under the prefix changed. A failed read
// makes it false at once.
func (m *EtcdMetastore) checkProgress(ctx context.Context) {
	defer m.done.Done()
	var target int64 // etcd's revision at the previous check; 0 before the first
	tick := time.NewTicker(m.interval)
	defer tick.Stop()
	for {
		// The watch's stream is the one its context's metadata names
		// (WithRequireLeader): the progress request must name it too. A
		// timeout: with etcd down, a failed check, not a hung one.
		checkCtx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), m.interval)
		resp, err := m.cli.Get(checkCtx, m.keys.root+"progress")
		if err == nil {
			err = m.cli.RequestProgress(checkCtx)
		}
		cancel()
		m.mu.Lock()
		applied := m.applied
		m.mu.Unlock()
		if err != nil {
			m.setCaughtUp(false)
			target = 0 // the next check's revision is the first to count (found by review)
		} else {
			m.setCaughtUp(target > 0 && applied >= target)
			target = resp.Header.Revision
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// notify tells each subscriber that topic changed.
func notify(subs []func(string), topic string) {
	for _, f := range subs {
		f(topic)
	}
}
