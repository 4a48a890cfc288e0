package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// checkLockOrder turns the lock-order checker on in a test's node.
var checkLockOrder = &TestOptions{CheckLockOrder: true}

var bg = context.Background()

const dataDir = "/data"

// newTestDisk returns a simulated disk holding the data directory,
// durably, as an installer leaves it.
func newTestDisk(t *testing.T, seed uint64) *sim.Disk {
	t.Helper()
	d := sim.NewDisk(seed)
	if err := d.MkdirAll(dataDir); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	return d
}

type testNode struct {
	*Node
	disk *sim.Disk
	ms   *LocalMetastore
}

// startNode starts a node over a simulated disk with the lock-order
// checker on; the test fails if any lock was taken out of order.
func startNode(t *testing.T, d *sim.Disk, cfg Config) *testNode {
	t.Helper()
	return startNodeWith(t, d, cfg, nil)
}

// startNodeWith is startNode with the node's metastore wrapped by wrap
// (nil: none); the test node's ms is the local metastore underneath.
func startNodeWith(t *testing.T, d *sim.Disk, cfg Config, wrap func(*LocalMetastore) Metastore) *testNode {
	t.Helper()
	if d == nil {
		d = newTestDisk(t, 1)
	}
	cfg.DataDir, cfg.FS, cfg.Testing = dataDir, d, checkLockOrder
	if cfg.SegmentMaxBytes == 0 {
		cfg.SegmentMaxBytes = 4 << 10
	}
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metastore = ms
	if wrap != nil {
		cfg.Metastore = wrap(ms)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		t.Fatal(err)
	}
	tn := &testNode{Node: n, disk: d, ms: ms}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if v := n.LockOrderViolations(); len(v) > 0 {
			t.Errorf("lock-order violations: %v", v)
		}
	})
	return tn
}

func recs(topic string, p int, from, n int) []partition.Record {
	out := make([]partition.Record, n)
	for i := range out {
		out[i] = partition.Record{Key: []byte(topic), Value: []byte(fmt.Sprintf("%s/%d/%d", topic, p, from+i))}
	}
	return out
}

func readValues(t *testing.T, n *testNode, topic string, p int) []string {
	t.Helper()
	var out []string
	for offset := int64(0); ; {
		res, err := n.Read(bg, topic, p, offset, 1000, 1<<20)
		if err != nil {
			t.Fatalf("read %s/%d at %d: %v", topic, p, offset, err)
		}
		for _, r := range res.Records {
			out = append(out, string(r.Value))
		}
		if res.Next == res.HighWatermark {
			return out
		}
		offset = res.Next
	}
}

// TestNode_ConcurrentTopicsAgainstAModel: many goroutines produce (both
// paths), read, evict, change retention, purge and reopen partitions of
// several topics at once;
// every partition ends holding exactly what its producers were told, in
// the order of their offsets, with the lock-order checker on.
func TestNode_ConcurrentTopicsAgainstAModel(t *testing.T) {
	t.Run("no budget", func(t *testing.T) { concurrentTopicsAgainstAModel(t, -1) })
	// Eleven partitions through four slots: opens close the least
	// recently used idle log, and a call finding all four in use is told
	// ErrBusy and retries.
	t.Run("a budget of 4 open logs", func(t *testing.T) { concurrentTopicsAgainstAModel(t, 4) })
}

func concurrentTopicsAgainstAModel(t *testing.T, budget int) {
	n := startNode(t, nil, Config{IdleEvictAfter: time.Nanosecond, ColdWalkInterval: 5 * time.Minute, MaxOpenLogs: budget})
	topics := []string{"orders", "payments", "audit.log"}
	for _, topic := range topics {
		if _, _, err := n.CreateTopic(bg, topic, 3, Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	type produced struct {
		topic string
		p     int
		base  int64
		vals  []string
	}
	results := make(chan produced, 1000)
	var wg sync.WaitGroup
	for w := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			topic, p := topics[w%3], w/3
			for i := range 20 {
				rs := recs(topic, p, w*1000+i*10, 1+i%3)
				var base int64
				err := retryBusy(func() (err error) {
					if i%4 == 0 {
						base, err = n.AppendCommit(bg, topic, p, rs)
					} else {
						base, err = n.Produce(bg, topic, p, rs)
					}
					return err
				})
				if err != nil {
					t.Errorf("produce %s/%d: %v", topic, p, err)
					return
				}
				vals := make([]string, len(rs))
				for j, r := range rs {
					vals[j] = string(r.Value)
				}
				results <- produced{topic, p, base, vals}
			}
		}()
	}
	stop := make(chan struct{})
	var side sync.WaitGroup
	side.Add(4)
	go func() { // retention changes: in place, each starting a reaper pass
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
				if _, err := n.SetRetention(bg, "audit.log", Retention{}); err != nil {
					t.Errorf("retention change: %v", err)
					return
				}
			}
		}
	}()
	go func() { // create, use and purge another topic
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
				n.CreateTopic(bg, "scratch", 2, Retention{})
				n.Produce(bg, "scratch", 1, recs("scratch", 1, 0, 1))
				if err := n.DeleteTopic(bg, "scratch"); err != nil {
					t.Errorf("delete: %v", err)
					return
				}
			}
		}
	}()
	go func() { // eviction racing the producers
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
				n.EvictIdle(time.Now())
			}
		}
	}()
	go func() { // readers racing both
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
				for _, topic := range topics {
					if err := retryBusy(func() error {
						_, err := n.Read(bg, topic, 0, 0, 10, 1<<20)
						return err
					}); err != nil {
						t.Errorf("read: %v", err)
						return
					}
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	side.Wait()
	close(results)
	if budget > 0 && n.reg.Evictions() == 0 {
		t.Error("no log was closed for the budget: the test did not press it")
	}
	model := map[string]map[int64]string{}
	for r := range results {
		k := fmt.Sprint(r.topic, "/", r.p)
		if model[k] == nil {
			model[k] = map[int64]string{}
		}
		for j, v := range r.vals {
			model[k][r.base+int64(j)] = v
		}
	}
	for _, topic := range topics {
		for p := range 3 {
			got := readValues(t, n, topic, p)
			want := model[fmt.Sprint(topic, "/", p)]
			if len(got) != len(want) {
				t.Fatalf("%s/%d: %d records, want %d", topic, p, len(got), len(want))
			}
			for off, v := range got {
				if want[int64(off)] != v {
					t.Fatalf("%s/%d offset %d: %q, want %q", topic, p, off, v, want[int64(off)])
				}
			}
		}
	}
}

// TestIncarnation_MatchAdoptAndQuarantine: a matching marker is served; a
// directory without one is adopted (stamped with the record's id); a
// different one is quarantined as <name>.stale-<oldid>, never served, the
// old consumer state dropped before the fresh directory exists, and a
// fresh log starts at offset 0 (docs/design.md, "The incarnation
// marker"). A later sweep reclaims the quarantined directory once the
// metastore confirms its incarnation is gone.
func TestIncarnation_MatchAdoptAndQuarantine(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	rec, _, err := n.CreateTopic(bg, "orders", 1, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dataDir, "topics", "orders", wire.IncarnationFileName)
	if b, _ := d.Contents(marker); string(b) != string(rec.Incarnation)+"\n" {
		t.Fatalf("marker %q, want %q", b, rec.Incarnation)
	}

	// Adopt: a directory from before markers.
	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	d.Remove(marker)
	if got := readValues(t, n, "orders", 0); len(got) != 3 {
		t.Fatalf("adopted directory served %d records, want 3", len(got))
	}
	if b, _ := d.Contents(marker); string(b) != string(rec.Incarnation)+"\n" {
		t.Fatalf("adopted directory not stamped: %q", b)
	}

	// The node missed the purge: the record is deleted and recreated
	// behind its back (a metastore change only), the old directory stays.
	var dropped []wire.IncarnationID
	n.dropConsumerState = func(topic string, id wire.IncarnationID) {
		if ok, _ := vfs.Exists(d, filepath.Join(dataDir, "topics", "orders")); ok {
			t.Errorf("consumer state dropped after the fresh directory exists")
		}
		dropped = append(dropped, id)
	}
	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	// Under the topic's guard, so the rechecks the changes start see the
	// recreate, never the delete alone (which they purge at once).
	guard := n.reg.Guard("orders")
	guard.Lock()
	n.ms.DeleteTopic(bg, "orders")
	fresh, _, _ := n.ms.CreateTopic(bg, "orders", 1, Retention{})
	guard.Unlock()
	n.background.Wait()
	if got := readValues(t, n, "orders", 0); len(got) != 0 {
		t.Fatalf("recreated topic served the deleted incarnation's records: %v", got)
	}
	stale := filepath.Join(dataDir, "topics", "orders.stale-"+string(rec.Incarnation))
	if ok, _ := vfs.Exists(d, stale); !ok {
		t.Fatal("the old directory was not quarantined")
	}
	if len(dropped) != 1 || dropped[0] != rec.Incarnation {
		t.Fatalf("consumer state dropped for %v, want the old id %s", dropped, rec.Incarnation)
	}
	if base, err := n.Produce(bg, "orders", 0, recs("orders", 0, 100, 1)); err != nil || base != 0 {
		t.Fatalf("first produce into the new incarnation = %d, %v; want offset 0", base, err)
	}
	if b, _ := d.Contents(marker); string(b) != string(fresh.Incarnation)+"\n" {
		t.Fatalf("fresh directory marker %q, want %q", b, fresh.Incarnation)
	}
	if removed := n.SweepQuarantine(bg); removed != 1 {
		t.Fatalf("quarantine sweep reclaimed %d, want 1", removed)
	}
	if ok, _ := vfs.Exists(d, stale); ok {
		t.Fatal("quarantined directory still there after the sweep")
	}
}

// TestIncarnation_DamagedMarkerIsRepairedFromItsCopy: the marker has a
// copy; with one of the two damaged (zeroed, a bit flipped, a byte
// changed) the other vouches for the directory, which keeps being served
// and gets both files written again, rather than being quarantined and
// later reclaimed with every record in it (found by the fault campaign's
// damage part). With both damaged it is taken as the record's unless a
// partition's consumer progress names another incarnation: then it is
// refused, neither served nor quarantined.
func TestIncarnation_DamagedMarkerIsRepairedFromItsCopy(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	rec, _, err := n.CreateTopic(bg, "orders", 1, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(dataDir, "topics", "orders")
	marker, copied := filepath.Join(dir, wire.IncarnationFileName), filepath.Join(dir, wire.IncarnationCopyFileName)
	good := string(rec.Incarnation) + "\n"
	other := []byte(good)
	other[3] ^= 1 // another valid id, or a non-hex byte
	for _, file := range []string{marker, copied} {
		for name, damaged := range map[string][]byte{
			"zeroed":          make([]byte, len(good)),
			"one bit flipped": other,
			"newline lost":    append([]byte(rec.Incarnation), 'x'),
		} {
			if err := n.reg.CloseLive(key("orders", 0)); err != nil {
				t.Fatal(err)
			}
			if err := d.Damage(file, 0, damaged); err != nil {
				t.Fatal(err)
			}
			if got := readValues(t, n, "orders", 0); len(got) != 3 {
				t.Fatalf("%s %s: served %d records, want 3", filepath.Base(file), name, len(got))
			}
			for _, f := range []string{marker, copied} {
				if b, _ := d.Contents(f); string(b) != good {
					t.Fatalf("%s %s: %s not written again: %q", filepath.Base(file), name, filepath.Base(f), b)
				}
			}
		}
	}
	entries, err := d.ReadDir(filepath.Join(dataDir, "topics"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("topics/ holds %v (%v), want only the live directory", entries, err)
	}

	// Both damaged (lying fsyncs of both writes and a power loss; the
	// long campaign found the topic's honest commits refused for good):
	// taken as the record's, as its consumer progress agrees.
	if _, err := n.Ack(bg, "orders", 0, 0); err != nil {
		t.Fatal(err)
	}
	n.committer.tickAll(runItem)
	n.committer.writeOutAll(runItem)
	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	d.Damage(marker, 0, []byte("x"))
	d.Damage(copied, 0, []byte("x"))
	if got := readValues(t, n, "orders", 0); len(got) != 3 {
		t.Fatalf("both damaged: served %d records, want 3", len(got))
	}
	if b, _ := d.Contents(marker); string(b) != good {
		t.Fatalf("both damaged: not stamped again: %q", b)
	}
	// The same, but the record is another incarnation's now (a delete
	// and recreate behind the node's back): the consumer progress names
	// the old one, so the directory may be a leftover. Refused, left in
	// place, neither served nor quarantined. (The damage comes first: an
	// intact old marker is quarantined by the recheck the recreate
	// starts.)
	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	d.Damage(marker, 0, []byte("x"))
	d.Damage(copied, 0, []byte("x"))
	n.ms.DeleteTopic(bg, "orders")
	n.ms.CreateTopic(bg, "orders", 1, Retention{})
	n.background.Wait()
	if _, err := n.Read(bg, "orders", 0, 0, 10, 1<<20); !errors.Is(err, ErrIncarnationMarkerDamaged) {
		t.Fatalf("both damaged, consumer progress of another incarnation: read %v, want ErrIncarnationMarkerDamaged", err)
	}
	if entries, _ := d.ReadDir(filepath.Join(dataDir, "topics")); len(entries) != 1 {
		t.Fatalf("both damaged: topics/ holds %v, want the directory left in place", entries)
	}

	// A directory holding no partition yet (a lying fsync took the
	// marker's first write, and the copy was never written; the long
	// campaign found the topic refused for good) is stamped again.
	fresh, _, err := n.CreateTopic(bg, "events", 1, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(dataDir, "topics", "events")
	if err := d.MkdirAll(events); err != nil {
		t.Fatal(err)
	}
	f, err := d.OpenFile(filepath.Join(events, wire.IncarnationFileName), os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 17))
	f.Close()
	if _, err := n.Produce(bg, "events", 0, recs("events", 0, 0, 1)); err != nil {
		t.Fatalf("produce into a partitionless directory whose marker was lost: %v", err)
	}
	if b, _ := d.Contents(filepath.Join(events, wire.IncarnationCopyFileName)); string(b) != string(fresh.Incarnation)+"\n" {
		t.Fatalf("not stamped again: copy %q", b)
	}
}

// TestIncarnation_DamagedMarkerOfADeletedIncarnationIsNeverServed: a
// delete whose purge did not run leaves the deleted incarnation's
// directory; with its marker damaged, the recreated topic's open must not
// take it for its own: the copy names the deleted incarnation, and the
// directory is quarantined (found by review: adopting a marker that did
// not decode served the deleted records as the new incarnation's).
func TestIncarnation_DamagedMarkerOfADeletedIncarnationIsNeverServed(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 4)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(dataDir, "topics", "orders")
	// Every rename fails: the delete's purge, and the one the recheck it
	// starts tries too.
	purge := d.Inject(sim.Fault{Op: sim.OpRename, Path: dir, Err: syscall.EIO})
	if err := n.DeleteTopic(bg, "orders"); err == nil || purge.Fired() == 0 {
		t.Fatalf("delete with its purge failing: %v", err)
	}
	n.background.Wait()
	purge.Remove()
	if err := d.Damage(filepath.Join(dir, wire.IncarnationFileName), 0, []byte("g")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	n.background.Wait()
	if got := readValues(t, n, "orders", 0); len(got) != 0 {
		t.Fatalf("the recreated topic serves %d records of the deleted incarnation: %v", len(got), got)
	}
}

// pausingMetastore holds the next Topic call, once armed, after its read
// and before it returns, until release is closed.
type pausingMetastore struct {
	*LocalMetastore
	armed   atomic.Bool
	read    chan struct{}
	release chan struct{}
}

func (m *pausingMetastore) Topic(ctx context.Context, name string) (TopicRecord, bool, error) {
	rec, ok, err := m.LocalMetastore.Topic(ctx, name)
	if m.armed.CompareAndSwap(true, false) {
		close(m.read)
		<-m.release
	}
	return rec, ok, err
}

// TestRecheck_StaleReadNeverRetiresANewIncarnationsLog: the recheck a
// delete starts decides on the record it reads under the topic's guard.
// Read before it, the record ("deleted") could predate a recreate and an
// open of the new incarnation, and the recheck then closed that live log
// (found by the fault campaign: a spurious close and reopen made the
// reference workload's calls differ from run to run).
func TestRecheck_StaleReadNeverRetiresANewIncarnationsLog(t *testing.T) {
	d := newTestDisk(t, 1)
	local, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	ms := &pausingMetastore{LocalMetastore: local, read: make(chan struct{}), release: make(chan struct{})}
	n, err := New(Config{DataDir: dataDir, FS: d, Testing: checkLockOrder, Metastore: ms})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	n.background.Wait()
	ms.armed.Store(true)
	local.DeleteTopic(bg, "orders") // behind the node's back: only its recheck sees it
	<-ms.read                       // the recheck has read "deleted" and is held
	if n.reg.Guard("orders").TryLockForTest() {
		// The read was outside the guard: recreate and open the new
		// incarnation before the held recheck decides.
		local.CreateTopic(bg, "orders", 1, Retention{})
		if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		close(ms.release)
	} else {
		close(ms.release) // the recheck decides first; the recreate comes after
		n.background.Wait()
		local.CreateTopic(bg, "orders", 1, Retention{})
		if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
	}
	n.background.Wait()
	live, ok := n.reg.Lookup(key("orders", 0))
	if !ok || live.Closed() {
		t.Fatal("the new incarnation's log was retired by a recheck of the delete before it")
	}
}

func key(topic string, p int) supervisor.Key { return supervisor.Key{Topic: topic, Partition: p} }

// TestIncarnation_DeleteRecreateWhileOpenRetiresTheLog: a delete and
// recreate applied while a log is open retire it when the version moves,
// rather than serving the old data.
func TestIncarnation_DeleteRecreateWhileOpenRetiresTheLog(t *testing.T) {
	n := startNode(t, nil, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 5)); err != nil {
		t.Fatal(err)
	}
	old, err := n.Log(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	n.ms.DeleteTopic(bg, "orders") // the purge never reaches this node
	n.ms.CreateTopic(bg, "orders", 1, Retention{})
	n.background.Wait()
	if _, err := old.Read(0, 10, 1<<20); !errors.Is(err, partition.ErrLogClosed) {
		t.Fatalf("the deleted incarnation's log still serves: %v", err)
	}
	if got := readValues(t, n, "orders", 0); len(got) != 0 {
		t.Fatalf("recreated topic serves %d old records", len(got))
	}
}

// TestIncarnation_PurgeLosingTheRaceKeepsTheNewDirectory: a purge of the
// deleted incarnation that arrives after the recreate opened the new one
// leaves the new directory alone.
func TestIncarnation_PurgeLosingTheRaceKeepsTheNewDirectory(t *testing.T) {
	n := startNode(t, nil, Config{})
	old, _, _ := n.CreateTopic(bg, "orders", 1, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 2))
	n.ms.DeleteTopic(bg, "orders")
	n.ms.CreateTopic(bg, "orders", 1, Retention{})
	n.background.Wait()
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 10, 3)); err != nil {
		t.Fatal(err)
	}
	if err := n.purge(old); err != nil {
		t.Fatal(err)
	}
	if got := readValues(t, n, "orders", 0); len(got) != 3 {
		t.Fatalf("the late purge took the new incarnation's data: %d records", len(got))
	}
}

// TestIncarnation_DeletedTopicNeverServedWhenItsDirectoryReappears: after a
// delete (purged) and recreate, restoring the old directory (a backup, a
// node that was down) is quarantined, never served.
func TestIncarnation_DeletedTopicNeverServedWhenItsDirectoryReappears(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 4))
	n.reg.CloseLive(key("orders", 0))
	snapshot := d.ProcessCrash()
	if err := n.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	n.ms.CreateTopic(bg, "orders", 1, Retention{})
	n.background.Wait()
	// Put the old incarnation's files back.
	for _, name := range []string{"incarnation", "p00000/00000000000000000000.log", "p00000/hwm"} {
		b, err := snapshot.Contents(filepath.Join(dataDir, "topics", "orders", name))
		if err != nil {
			t.Fatal(err)
		}
		d.MkdirAll(filepath.Join(dataDir, "topics", "orders", "p00000"))
		if err := vfs.WriteFileAtomic(d, filepath.Join(dataDir, "topics", "orders", name), b); err != nil {
			t.Fatal(err)
		}
	}
	if got := readValues(t, n, "orders", 0); len(got) != 0 {
		t.Fatalf("served %d records of the deleted incarnation", len(got))
	}
}

// TestNode_PartitionsAreBoundedByTheirDirectoryNames: a partition's
// directory name holds five digits, so a topic has at most
// wire.MaxPartitions partitions, numbered below it: a wider topic is
// refused at create, and a partition number past the names is not found
// (before, a topic of one more was created and its last partition failed
// every produce on its directory name).
func TestNode_PartitionsAreBoundedByTheirDirectoryNames(t *testing.T) {
	n := startNode(t, nil, Config{})
	if _, _, err := n.CreateTopic(bg, "wide", wire.MaxPartitions+1, Retention{}); err == nil {
		t.Fatalf("created a topic of %d partitions, one more than a directory name holds", wire.MaxPartitions+1)
	}
	if _, _, err := n.CreateTopic(bg, "widest", wire.MaxPartitions, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "widest", wire.MaxPartitions-1, recs("widest", wire.MaxPartitions-1, 0, 1)); err != nil {
		t.Fatalf("the last partition: %v", err)
	}
	for _, p := range []int{-1, wire.MaxPartitions} {
		if _, err := n.key("widest", p); !errors.Is(err, ErrPartitionNotFound) {
			t.Fatalf("partition %d: %v, want ErrPartitionNotFound", p, err)
		}
	}
}

// TestNode_SlowOpenOfOneTopicDoesNotBlockAnother: while one topic's open
// is held inside the file system (a blocking hook, not a timer), produce
// and read on another topic complete.
func TestNode_SlowOpenOfOneTopicDoesNotBlockAnother(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	n.CreateTopic(bg, "slow", 1, Retention{})
	n.CreateTopic(bg, "fast", 1, Retention{})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpReadDir && c.Path == filepath.Join(dataDir, "topics", "slow", "p00000") {
			once.Do(func() { close(entered) })
			<-release
		}
		return nil
	})
	defer d.SetHook(nil)
	done := make(chan error, 1)
	go func() { _, err := n.Produce(bg, "slow", 0, recs("slow", 0, 0, 1)); done <- err }()
	<-entered
	if _, err := n.Produce(bg, "fast", 0, recs("fast", 0, 0, 2)); err != nil {
		t.Fatal(err)
	}
	if got := readValues(t, n, "fast", 0); len(got) != 2 {
		t.Fatalf("fast topic: %d records", len(got))
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestStartup_SkipsFailuresThenReady: startup opens every owned partition,
// skipping (with a warning) one whose open fails, and reports ready after.
func TestStartup_SkipsFailuresThenReady(t *testing.T) {
	d := newTestDisk(t, 1)
	first := startNode(t, d, Config{})
	first.CreateTopic(bg, "a", 2, Retention{})
	first.CreateTopic(bg, "b", 1, Retention{})
	for _, k := range [][2]any{{"a", 0}, {"a", 1}, {"b", 0}} {
		first.Produce(bg, k[0].(string), k[1].(int), recs("x", 0, 0, 1))
	}
	first.Close()

	bad := filepath.Join(dataDir, "topics", "a", "p00001")
	d.Inject(sim.Fault{Op: sim.OpReadDir, Path: bad, Err: syscall.EIO})
	ms, _ := OpenLocalMetastore(d, dataDir)
	n, err := New(Config{DataDir: dataDir, FS: d, Testing: checkLockOrder, Metastore: ms})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.Ready() {
		t.Fatal("ready before startup")
	}
	if err := n.Start(bg); err != nil {
		t.Fatal(err)
	}
	if !n.Ready() {
		t.Fatal("not ready after startup")
	}
	if got := n.reg.Len(); got != 2 {
		t.Fatalf("%d partitions open after startup, want the 2 that could open", got)
	}
}

// TestPeek_AnswersWithoutOpening: a closed partition's boundary comes from
// its hwm file; after a crash (empty file, records present) it is unknown,
// never 0; with no record bytes it is the newest segment's base.
func TestPeek_AnswersWithoutOpening(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	n.CreateTopic(bg, "orders", 2, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 7))
	n.reg.CloseLive(key("orders", 0))
	hwm, known, err := n.PeekHighWatermark("orders", 0)
	if err != nil || !known || hwm != 7 {
		t.Fatalf("peek of a cleanly closed log = %d %v %v; want 7", hwm, known, err)
	}
	if _, ok := n.reg.Lookup(key("orders", 0)); ok {
		t.Fatal("peek opened the log")
	}
	hwmFile := filepath.Join(dataDir, "topics", "orders", "p00000", "hwm")
	vfs.WriteFileAtomic(d, hwmFile, nil) // as a crash leaves it
	if _, known, _ := n.PeekHighWatermark("orders", 0); known {
		t.Fatal("an empty hwm file with records was taken as a boundary")
	}
	if _, known, _ := n.PeekHighWatermark("orders", 1); !known {
		t.Fatal("a partition with no record bytes has a known boundary")
	}
}

// TestEviction_KeepsLogsRetentionStillWorksOn: with the cold walk off, an
// idle log is closed (its hwm file written) only once retention has
// nothing left to delete in it.
func TestEviction_KeepsLogsRetentionStillWorksOn(t *testing.T) {
	d := newTestDisk(t, 1)
	clock := time.Now()
	d.SetClock(func() time.Time { return clock })
	n := startNode(t, d, Config{IdleEvictAfter: time.Minute})
	n.CreateTopic(bg, "kept", 1, Retention{})
	n.CreateTopic(bg, "expiring", 1, Retention{Ms: 1}) // 1 ms retention: expired at once
	n.Produce(bg, "kept", 0, recs("kept", 0, 0, 1))
	n.Produce(bg, "expiring", 0, recs("expiring", 0, 0, 1))
	expiring, _ := n.Log(bg, "expiring", 0)
	for {
		if ok, _ := expiring.Expired(bg); ok {
			break
		}
	}
	if closed := n.EvictIdle(time.Now().Add(time.Hour)); closed != 1 {
		t.Fatalf("evicted %d logs, want only the one retention is done with", closed)
	}
	if _, ok := n.reg.Lookup(key("expiring", 0)); !ok {
		t.Fatal("a log with expired segments was evicted with the cold walk off")
	}
	if _, known, _ := n.PeekHighWatermark("kept", 0); !known {
		t.Fatal("evicted log's boundary not written")
	}
}

// TestNode_BadNamesCreateNothing: invalid topic names are refused before
// any path is built from them.
func TestNode_BadNamesCreateNothing(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	for _, name := range []string{"", ".", "..", "../etc", "a/b", "x.stale-0123456789abcdef", string(make([]byte, 201))} {
		if _, _, err := n.CreateTopic(bg, name, 1, Retention{}); err == nil {
			t.Fatalf("CreateTopic(%q) succeeded", name)
		}
		if _, err := n.Produce(bg, name, 0, recs("x", 0, 0, 1)); err == nil {
			t.Fatalf("Produce(%q) succeeded", name)
		}
	}
	entries, _ := d.ReadDir(filepath.Join(dataDir, "topics"))
	if len(entries) != 0 {
		t.Fatalf("bad names created %v", entries)
	}
}

// TestNode_PartitionsListsOwnedWithoutOpening: the listing names every
// owned partition and opens none.
func TestNode_PartitionsListsOwnedWithoutOpening(t *testing.T) {
	n := startNode(t, nil, Config{})
	n.CreateTopic(bg, "b", 2, Retention{})
	n.CreateTopic(bg, "a", 1, Retention{})
	n.Produce(bg, "b", 1, recs("b", 1, 0, 1))
	n.reg.CloseLive(key("b", 0))
	got, err := n.Partitions(bg)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[{a 0 false} {b 0 false} {b 1 true}]" {
		t.Fatalf("partitions %v", got)
	}
	if _, open := n.reg.Lookup(key("a", 0)); open {
		t.Fatal("the listing opened a log")
	}
}

// TestTopicDir_AFailedSyncOfItsEntryLosesNothingAcked: the directory sync
// that makes a new topic directory's entry durable fails; the produce
// fails and its retry succeeds, and a power loss after that keeps the
// records (found by the fault campaign: the retry found the directory in
// place, adopted it without a sync, and its acked records vanished with
// the entry).
func TestTopicDir_AFailedSyncOfItsEntryLosesNothingAcked(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	fault := d.Inject(sim.Fault{Op: sim.OpSyncDir, Path: filepath.Join(dataDir, "topics"), Nth: 1, Err: syscall.EIO})
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err == nil || fault.Fired() != 1 {
		t.Fatalf("produce with the topic directory's sync failing: %v (the fault fired %d times)", err, fault.Fired())
	}
	if base, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil || base != 0 {
		t.Fatalf("the retry: %d, %v", base, err)
	}
	crashed := d.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
	after := startNode(t, crashed, Config{})
	if got := readValues(t, after, "orders", 0); len(got) != 3 {
		t.Fatalf("after a power loss: %d records, want the 3 acked", len(got))
	}
}
