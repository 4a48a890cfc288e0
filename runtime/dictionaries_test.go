package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// orderRecords are small JSON records, one a produce: a trickle-fed topic.
func orderRecords(from, n int) []partition.Record {
	out := make([]partition.Record, n)
	for i := range out {
		out[i] = partition.Record{Key: fmt.Appendf(nil, "ord-%d", from+i), Value: fmt.Appendf(nil,
			`{"order_id":%d,"status":"paid","currency":"EUR","country":"DE","items":[{"sku":"BEAN-%d","qty":%d,"price_cents":%d}]}`,
			from+i, (from+i)%13, 1+(from+i)%4, 1299+(from+i)%700)}
	}
	return out
}

func produceOneByOne(t *testing.T, n *testNode, topic string, from, count int) {
	t.Helper()
	for i := range count {
		if _, err := n.Produce(bg, topic, 0, orderRecords(from+i, 1)); err != nil {
			t.Fatal(err)
		}
	}
}

// testDictionary trains a dictionary the way the node does, on records'
// one-record payloads.
func testDictionary(t *testing.T, seed int) *codec.Dictionary {
	t.Helper()
	var samples [][]byte
	for _, r := range orderRecords(seed*1000, 300) {
		env, _ := wire.AppendEnvelope(nil, r.Key, 1, r.Value)
		sample, _ := wire.AppendRecordFrame(nil, env)
		samples = append(samples, sample)
	}
	d, err := codec.TrainDictionary(samples, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDictionaryFile_CrashAtEveryCall: a power loss after any file call of
// storing a dictionary, with any unsynced state, leaves the topic with no
// dictionary or with the whole one, never a damaged file that loads; once
// the store returned, the dictionary is there.
func TestDictionaryFile_CrashAtEveryCall(t *testing.T) {
	dict := testDictionary(t, 1)
	const dir = "/data/topics/orders"
	for stop := 1; ; stop++ {
		d := newTestDisk(t, uint64(stop))
		if err := vfs.MkdirAllDurable(d, dir); err != nil {
			t.Fatal(err)
		}
		calls := 0
		d.SetHook(func(sim.Call) error {
			if calls++; calls == stop {
				return errors.New("stopped")
			}
			return nil
		})
		err := storeDictionaryFile(d, dir, dict, 1234)
		d.SetHook(nil)
		var crashed []*sim.Disk
		for seed := range uint64(6) {
			crashed = append(crashed, d.Crash(sim.CrashPlan{Data: sim.TearUnsynced, Seed: seed, KeepNameOps: int(seed % 3)}))
		}
		crashed = append(crashed, d.Crash(sim.CrashPlan{Data: sim.KeepUnsynced, KeepNameOps: -1}), d.Crash(sim.CrashPlan{Data: sim.DropUnsynced}))
		for i, c := range crashed {
			set, infos := loadDictionaryFiles(c, dir, zap.NewNop())
			switch {
			case len(infos) > 1:
				t.Fatalf("stop %d, crash %d: %d dictionaries loaded", stop, i, len(infos))
			case len(infos) == 1 && (infos[0].ID != dict.ID() || !set.Lookup(dict.ID()).Equal(dict) || set.Current() == nil):
				t.Fatalf("stop %d, crash %d: loaded %+v, not the dictionary stored", stop, i, infos[0])
			case err == nil && len(infos) == 0:
				t.Fatalf("stop %d, crash %d: the store returned nil and the crash lost the dictionary", stop, i)
			}
			// A leftover temporary never stops a later store.
			if err := storeDictionaryFile(c, dir, dict, 1234); err != nil {
				t.Fatalf("stop %d, crash %d: storing again: %v", stop, i, err)
			}
		}
		if err == nil {
			if stop < 5 {
				t.Fatalf("the store finished after %d calls: too few to be durable", stop)
			}
			return
		}
	}
}

// TestDictionaryFile_DamageIsLeftOutAndConflictsRefused: a flipped byte or
// a file named for another id loads nothing (and is logged); storing other
// bytes under a taken id is refused, the same bytes again is a no-op.
func TestDictionaryFile_DamageIsLeftOutAndConflictsRefused(t *testing.T) {
	dict, other := testDictionary(t, 1), testDictionary(t, 2)
	const dir = "/data/topics/orders"
	d := newTestDisk(t, 1)
	if err := vfs.MkdirAllDurable(d, dir); err != nil {
		t.Fatal(err)
	}
	if err := storeDictionaryFile(d, dir, dict, 1); err != nil {
		t.Fatal(err)
	}
	if err := storeDictionaryFile(d, dir, dict, 2); err != nil {
		t.Fatalf("the same dictionary again: %v", err)
	}
	name, _ := wire.DictionaryFileName(dict.ID())
	good, _ := d.Contents(filepath.Join(dir, name))

	// other's bytes renamed to dict's id: conflict on store, left out on load.
	otherName, _ := wire.DictionaryFileName(other.ID())
	if err := storeDictionaryFile(d, dir, other, 3); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename(filepath.Join(dir, otherName), filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	if err := storeDictionaryFile(d, dir, dict, 4); err == nil {
		t.Fatal("storing over a file that holds another id succeeded")
	}
	if _, infos := loadDictionaryFiles(d, dir, zap.NewNop()); len(infos) != 0 {
		t.Fatalf("a file named for another id loaded: %+v", infos)
	}

	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x10
	if err := vfs.WriteFileAtomic(d, filepath.Join(dir, name), flipped); err != nil {
		t.Fatal(err)
	}
	if set, infos := loadDictionaryFiles(d, dir, zap.NewNop()); len(infos) != 0 || set.Lookup(dict.ID()) != nil {
		t.Fatalf("a damaged file loaded: %+v", infos)
	}
}

// TestTrainDictionary_NewFramesUseItOldOnesStayReadable: a topic's records
// train a dictionary, new frames name it and take fewer bytes, every record
// before and after reads back, across a restart; without the file, its
// frames are unreadable (ErrDictionaryMissing), the others served; the
// topic's delete takes the file with it.
func TestTrainDictionary_NewFramesUseItOldOnesStayReadable(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{SegmentMaxBytes: 1 << 20})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.TrainDictionary(bg, "orders", DictionaryTraining{}); !errors.Is(err, codec.ErrBadDictionary) {
		t.Fatalf("training an empty topic: %v, want ErrBadDictionary", err)
	}
	produceOneByOne(t, n, "orders", 0, 300)
	segment := filepath.Join(dataDir, "topics", "orders", "p00000", "00000000000000000000.log")
	before, _ := d.Contents(segment)

	info, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 300, MaxBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if info.Samples != 300 || info.ID < codec.MinDictionaryID {
		t.Fatalf("trained %+v", info)
	}
	listed, err := n.Dictionaries(bg, "orders")
	if err != nil || len(listed) != 1 || listed[0].ID != info.ID {
		t.Fatalf("Dictionaries = %+v, %v", listed, err)
	}
	produceOneByOne(t, n, "orders", 300, 300)
	after, _ := d.Contents(segment)
	plainBytes, dictBytes := len(before), len(after)-len(before)
	if dictBytes*10 > plainBytes*8 {
		t.Fatalf("300 records: %d bytes without the dictionary, %d with it", plainBytes, dictBytes)
	}
	checkOrders := func(n *testNode, want int) {
		t.Helper()
		got := readValues(t, n, "orders", 0)
		if len(got) != want {
			t.Fatalf("read %d records, want %d", len(got), want)
		}
		for i, v := range got {
			if v != string(orderRecords(i, 1)[0].Value) {
				t.Fatalf("record %d: %q", i, v)
			}
		}
	}
	checkOrders(n, 600)

	// A restart (the process dies, the page cache survives) loads it.
	restarted := startNode(t, d.ProcessCrash(), Config{SegmentMaxBytes: 1 << 20})
	checkOrders(restarted, 600)
	produceOneByOne(t, restarted, "orders", 600, 10)
	checkOrders(restarted, 610)

	// Without its file: the dictionary's frames are damage, never served.
	lost := restarted.disk.ProcessCrash()
	name, _ := wire.DictionaryFileName(info.ID)
	if err := lost.Remove(filepath.Join(dataDir, "topics", "orders", name)); err != nil {
		t.Fatal(err)
	}
	without := startNode(t, lost, Config{SegmentMaxBytes: 1 << 20})
	if res, err := without.Read(bg, "orders", 0, 0, 300, 1<<20); err != nil || len(res.Records) != 300 {
		t.Fatalf("frames from before the dictionary: %d, %v", len(res.Records), err)
	}
	_, err = without.Read(bg, "orders", 0, 300, 10, 1<<20)
	var unreadable *partition.UnreadableError
	if !errors.As(err, &unreadable) || !errors.Is(err, codec.ErrDictionaryMissing) {
		t.Fatalf("a frame whose dictionary is gone: %v", err)
	}

	// Delete takes the dictionaries with the topic.
	if err := restarted.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if ok, err := vfs.Exists(restarted.disk, filepath.Join(dataDir, "topics", "orders", name)); ok || err != nil {
		t.Fatalf("the dictionary outlived its topic's delete: %v, %v", ok, err)
	}
}
