package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
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

// TestTransfer_CarriesTheTopicsDictionaries: a partition whose frames name
// the topic's dictionary moves with the dictionary file (the listing names
// it, the source opens it, the receive stores it durably in the topic
// directory before the commit), and the new owner serves every record,
// open topic set or not; a dictionary file that does not check out is
// refused and nothing is stored.
func TestTransfer_CarriesTheTopicsDictionaries(t *testing.T) {
	src := startNode(t, nil, Config{SegmentMaxBytes: 1 << 20})
	rec, _, _ := src.CreateTopic(bg, "orders", 2, Retention{})
	produceOneByOne(t, src, "orders", 0, 100)
	info, err := src.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 100, MaxBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	produceOneByOne(t, src, "orders", 100, 100)
	want := readValues(t, src, "orders", 0)
	if err := src.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	listing, err := src.TransferListing(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := wire.DictionaryFileName(info.ID)
	if len(listing.Dictionaries) != 1 || listing.Dictionaries[0].Name != name {
		t.Fatalf("listing's dictionaries %+v, want %s", listing.Dictionaries, name)
	}

	dst := startNode(t, nil, Config{SegmentMaxBytes: 1 << 20})
	dst.ms.CreateTopic(bg, "orders", 2, Retention{})
	dst.ms.mu.Lock()
	r := dst.ms.topics["orders"]
	r.Incarnation = rec.Incarnation
	dst.ms.topics["orders"] = r
	dst.ms.mu.Unlock()
	// Partition 1 is open on the target: the topic's set is loaded before
	// the dictionary arrives, and must learn it.
	if _, err := dst.Produce(bg, "orders", 1, orderRecords(0, 1)); err != nil {
		t.Fatal(err)
	}

	receive := func(files []SegmentFile) error {
		t.Helper()
		rcv, err := dst.ReceivePartition(bg, "orders", 0, rec.Incarnation)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			file, err := src.OpenTransferFile(bg, "orders", 0, f.Name)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, f.Size)
			if _, err := file.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			file.Close()
			if _, err := wire.ParseDictionaryFileName(f.Name); err == nil && len(files) == 1 {
				b[len(b)-1] ^= 1 // the refused case: a flipped byte
			}
			if err := rcv.WriteFile(f.Name, f.Size, bytes.NewReader(b)); err != nil {
				return errors.Join(err, rcv.Abort())
			}
		}
		hwm, _ := wire.EncodeOffsetFile(listing.HighWatermark)
		if err := rcv.WriteFile(wire.HWMFileName, int64(len(hwm)), bytes.NewReader(hwm[:])); err != nil {
			t.Fatal(err)
		}
		return rcv.Commit(bg)
	}
	if err := receive(listing.Dictionaries); !errors.Is(err, wire.ErrCorrupt) {
		t.Fatalf("a damaged dictionary file: %v, want ErrCorrupt", err)
	}
	if ok, _ := vfs.Exists(dst.disk, filepath.Join(dataDir, "topics", "orders", name)); ok {
		t.Fatal("a damaged dictionary file was stored")
	}
	if err := receive(append(append([]SegmentFile{}, listing.Dictionaries...), listing.Segments...)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := vfs.Exists(dst.disk, filepath.Join(dataDir, "topics", "orders", name)); !ok {
		t.Fatal("the dictionary file did not move")
	}
	got := readValues(t, dst, "orders", 0)
	if len(got) != len(want) || got[150] != want[150] {
		t.Fatalf("the new owner serves %d records, want %d", len(got), len(want))
	}
	// The moved dictionary is the target's current one now (the newest),
	// as a restart of the target would choose.
	if cur := dst.dictionaries.topics["orders"].set.Current(); cur == nil || cur.ID() != info.ID {
		t.Fatalf("the target's current dictionary: %v", cur)
	}
}

// staleOnceMetastore answers the next Topic call, once armed, with an older
// record of the topic: a read that raced a delete and recreate.
type staleOnceMetastore struct {
	*LocalMetastore
	armed atomic.Bool
	stale TopicRecord
}

func (m *staleOnceMetastore) Topic(ctx context.Context, name string) (TopicRecord, bool, error) {
	if m.armed.CompareAndSwap(true, false) {
		return m.stale, true, nil
	}
	return m.LocalMetastore.Topic(ctx, name)
}

// TestTrainDictionary_AStaleRecordNeverJudgesTheNewDirectory: a training
// that read the topic's record before a delete and recreate stores
// nothing and leaves the new incarnation's directory served, where the
// old record would have taken the new marker for a leftover and set the
// live directory aside.
func TestTrainDictionary_AStaleRecordNeverJudgesTheNewDirectory(t *testing.T) {
	var ms *staleOnceMetastore
	n := startNodeWith(t, nil, Config{SegmentMaxBytes: 1 << 20}, func(local *LocalMetastore) Metastore {
		ms = &staleOnceMetastore{LocalMetastore: local}
		return ms
	})
	old, _, err := n.CreateTopic(bg, "orders", 1, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	produceOneByOne(t, n, "orders", 0, 50)
	ms.stale = old
	ms.armed.Store(true)
	if _, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 50, MaxBytes: 4 << 10}); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("training on a stale record: %v, want ErrTopicNotFound", err)
	}
	if got := readValues(t, n, "orders", 0); len(got) != 50 {
		t.Fatalf("the new incarnation serves %d records, want 50", len(got))
	}
	if infos, err := n.Dictionaries(bg, "orders"); err != nil || len(infos) != 0 {
		t.Fatalf("dictionaries after the refused training: %+v, %v", infos, err)
	}
}

// TestDictionaries_AFailedListingIsNotKept: a topic directory whose listing
// fails at a log's open fails the open (the disk's error, retried; no
// frame read as damage), and the next open lists it again and serves
// them.
func TestDictionaries_AFailedListingIsNotKept(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{SegmentMaxBytes: 1 << 20})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	produceOneByOne(t, n, "orders", 0, 50)
	if _, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 50, MaxBytes: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	produceOneByOne(t, n, "orders", 50, 10)

	crashed := d.ProcessCrash()
	// Every listing of the topic directory from the second on: startup's
	// look for an unfinished install is the first, then the log's opens
	// list the dictionaries.
	eio := crashed.Inject(sim.Fault{Op: sim.OpReadDir, Path: filepath.Join(dataDir, "topics", "orders"), Nth: 2, Sticky: true, Err: syscall.EIO})
	restarted := startNode(t, crashed, Config{SegmentMaxBytes: 1 << 20})
	_, err := restarted.Read(bg, "orders", 0, 50, 10, 1<<20)
	eio.Remove()
	if err == nil || errors.Is(err, partition.ErrUnreadable) || !errors.Is(err, syscall.EIO) || eio.Fired() == 0 {
		t.Fatalf("a read with the listing failing: %v, want the disk's error, not damage (the fault fired %d times)", err, eio.Fired())
	}
	if err := restarted.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	if got := readValues(t, restarted, "orders", 0); len(got) != 60 {
		t.Fatalf("after a reopen: %d records, want 60", len(got))
	}
}

// TestDictionaryAfter_TrainsOnceEnoughRecordsAreSeen: a topic whose record
// sets DictionaryAfter gets a dictionary by itself once that many records
// were produced on the node, and its frames use it; a topic without the
// option (the default) never does; out-of-bounds values are refused.
func TestDictionaryAfter_TrainsOnceEnoughRecordsAreSeen(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := startNode(t, nil, Config{SegmentMaxBytes: 4 << 20, Registerer: reg})
	for _, topic := range []string{"orders", "plain"} {
		if _, _, err := n.CreateTopic(bg, topic, 1, Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []int64{-1, 1, MinDictionaryAfter - 1, MaxDictionaryAfter + 1} {
		if _, err := n.SetDictionaryAfter(bg, "orders", bad); !errors.Is(err, ErrBadDictionaryAfter) {
			t.Fatalf("dictionary_after %d: %v", bad, err)
		}
	}
	if _, err := n.TrainDictionary(bg, "orders", DictionaryTraining{}); !errors.Is(err, codec.ErrBadDictionary) {
		t.Fatalf("training an empty topic: %v", err)
	}
	rec, err := n.SetDictionaryAfter(bg, "orders", MinDictionaryAfter)
	if err != nil || rec.DictionaryAfter != MinDictionaryAfter {
		t.Fatalf("SetDictionaryAfter: %+v, %v", rec, err)
	}
	produce := func(topic string, from, count int) {
		for i := range count {
			if _, err := n.Produce(bg, topic, 0, orderRecords(from+i, 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("orders", 0, MinDictionaryAfter-1)
	produce("plain", 0, MinDictionaryAfter+autoCheckEvery)
	n.background.Wait()
	if infos, _ := n.Dictionaries(bg, "orders"); len(infos) != 0 {
		t.Fatalf("a dictionary before enough records: %+v", infos)
	}
	produce("orders", MinDictionaryAfter-1, autoCheckEvery+1)
	n.background.Wait() // the training started in the background
	infos, err := n.Dictionaries(bg, "orders")
	if err != nil || len(infos) != 1 {
		t.Fatalf("after %d records: %+v, %v", MinDictionaryAfter+autoCheckEvery, infos, err)
	}
	if plain, _ := n.Dictionaries(bg, "plain"); len(plain) != 0 {
		t.Fatalf("a topic without the option got %+v", plain)
	}
	produce("orders", MinDictionaryAfter+autoCheckEvery, 1)
	res, err := n.Read(bg, "orders", 0, int64(MinDictionaryAfter+autoCheckEvery), 1, 1<<20)
	if err != nil || len(res.Records) != 1 || string(res.Records[0].Value) != string(orderRecords(MinDictionaryAfter+autoCheckEvery, 1)[0].Value) {
		t.Fatalf("the record after the training: %+v, %v", res.Records, err)
	}
	// Not trained again: the topic holds one.
	produce("orders", MinDictionaryAfter+autoCheckEvery+1, 2*autoCheckEvery)
	n.background.Wait()
	if infos, _ := n.Dictionaries(bg, "orders"); len(infos) != 1 {
		t.Fatalf("trained again: %+v", infos)
	}
	if got := series(t, reg, "narad_dictionary_trainings_total"); got != "result=refused trigger=request 1\nresult=trained trigger=automatic 1\n" {
		t.Fatalf("narad_dictionary_trainings_total: %q", got)
	}
}

// TestDictionary_RetentionNeverTakesIt: retention deleting every sealed
// segment, including all frames of a dictionary, leaves the dictionary
// file (a frame may still name it: only the topic's delete removes it),
// and what is left reads back.
func TestDictionary_RetentionNeverTakesIt(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 4 << 10})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	produceOneByOne(t, n, "orders", 0, 100)
	info, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 100, MaxBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	produceOneByOne(t, n, "orders", 100, 200)
	if _, err := n.SetRetention(bg, "orders", Retention{Bytes: 1}); err != nil {
		t.Fatal(err)
	}
	l, err := n.Log(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Sweep(bg); err != nil { // what the reaper does next
		t.Fatal(err)
	}
	start, err := n.Read(bg, "orders", 0, 0, 1, 1<<20)
	if err == nil || !errors.Is(err, partition.ErrOffsetDeleted) {
		t.Fatalf("offset 0 after retention: %v, %d records", err, len(start.Records))
	}
	name, _ := wire.DictionaryFileName(info.ID)
	if ok, err := vfs.Exists(n.disk, filepath.Join(dataDir, "topics", "orders", name)); !ok || err != nil {
		t.Fatalf("retention took the dictionary file: %v, %v", ok, err)
	}
	res, err := n.Read(bg, "orders", 0, 299, 1, 1<<20)
	if err != nil || len(res.Records) != 1 || string(res.Records[0].Value) != string(orderRecords(299, 1)[0].Value) {
		t.Fatalf("the newest record after retention: %+v, %v", res.Records, err)
	}
}

// TestDictionaries_AFailedFileReadIsNotDamage: an I/O error reading one
// dictionary file at a log's open is the disk's error, not a lost
// dictionary: the frames that name it must not read as damage (which
// consumers settle without delivering), and once the disk answers they
// are served.
func TestDictionaries_AFailedFileReadIsNotDamage(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{SegmentMaxBytes: 1 << 20})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	produceOneByOne(t, n, "orders", 0, 50)
	info, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 50, MaxBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	produceOneByOne(t, n, "orders", 50, 10)
	name, _ := wire.DictionaryFileName(info.ID)

	crashed := d.ProcessCrash()
	eio := crashed.Inject(sim.Fault{Op: sim.OpRead, Path: filepath.Join(dataDir, "topics", "orders", name), Nth: 1, Err: syscall.EIO})
	restarted := startNode(t, crashed, Config{SegmentMaxBytes: 1 << 20})
	_, err = restarted.Read(bg, "orders", 0, 50, 10, 1<<20)
	fired := eio.Fired()
	eio.Remove()
	if fired == 0 {
		t.Fatal("the fault never fired")
	}
	// The fault may fire at startup's open or at this read's: either way
	// the read is served or fails with the disk's error, never as damage.
	if err != nil && (errors.Is(err, partition.ErrUnreadable) || !errors.Is(err, syscall.EIO)) {
		t.Errorf("a read with the dictionary file's read failing once: %v, want the disk's error, not damage", err)
	}
	if err := restarted.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	if got := readValues(t, restarted, "orders", 0); len(got) != 60 {
		t.Fatalf("after the disk answers again and a reopen: %d records, want 60", len(got))
	}
}

// TestTrainDictionary_AgainOnTheSameRecords: a second training on records
// that did not change (an operator's retry, a retry after a failed store)
// succeeds: an id is taken from the trained bytes, so one id never names
// two dictionaries and the second is never refused as a conflict (with
// the id taken from the samples it was).
func TestTrainDictionary_AgainOnTheSameRecords(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 20})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	produceOneByOne(t, n, "orders", 0, 50)
	first, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 50, MaxBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 50, MaxBytes: 4 << 10}); err != nil {
		t.Fatalf("training again on the same 50 records (first id %d): %v", first.ID, err)
	}
}

// TestTrainDictionary_SamplesHeldAreBounded: a training never holds more
// sample bytes than codec.TrainDictionary accepts (codec.MaxTrainingBytes),
// nor a record larger than a dictionary may be (codec.MaxDictionaryBytes:
// such a record finds its own matches), however large the topic's records
// and however many are asked for.
func TestTrainDictionary_SamplesHeldAreBounded(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{SegmentMaxBytes: 64 << 20})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 4<<20)
	for range 4 { // too large to learn from
		if _, err := n.Produce(bg, "orders", 0, []partition.Record{{Value: big}}); err != nil {
			t.Fatal(err)
		}
	}
	near := make([]byte, codec.MaxDictionaryBytes-1<<10)
	batch := []partition.Record{{Value: near}, {Value: near}, {Value: near}, {Value: near}, {Value: near}}
	for range 14 { // 70 MiB of records a dictionary may learn from, over codec.MaxTrainingBytes
		if _, err := n.Produce(bg, "orders", 0, batch); err != nil {
			t.Fatal(err)
		}
	}
	rec, _, err := n.ms.Topic(bg, "orders")
	if err != nil {
		t.Fatal(err)
	}
	samples, err := n.dictionarySamples(bg, rec, 200)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, s := range samples {
		if len(s) > codec.MaxDictionaryBytes {
			t.Fatalf("a sample of %d bytes, over the %d a dictionary may hold", len(s), codec.MaxDictionaryBytes)
		}
		total += len(s)
	}
	if total > codec.MaxTrainingBytes || len(samples) == 0 {
		t.Fatalf("a training held %d samples of %d MiB, want some and at most the %d MiB it may train on", len(samples), total>>20, codec.MaxTrainingBytes>>20)
	}
}

// TestTrainDictionary_AFailedStoreNamesItInNoFrame: a training whose
// dictionary file could not be stored durably never makes it current: the
// records produced after it are acked in frames that name no dictionary a
// power loss can take, and all read back after one.
func TestTrainDictionary_AFailedStoreNamesItInNoFrame(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{SegmentMaxBytes: 1 << 20})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	produceOneByOne(t, n, "orders", 0, 50)
	eio := d.Inject(sim.Fault{Op: sim.OpSyncDir, Path: filepath.Join(dataDir, "topics", "orders"), Nth: 1, Err: syscall.EIO})
	if _, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 50, MaxBytes: 4 << 10}); err == nil || eio.Fired() == 0 {
		t.Fatalf("a training whose directory sync failed: %v (fired %d)", err, eio.Fired())
	}
	eio.Remove()
	produceOneByOne(t, n, "orders", 50, 10)

	restarted := startNode(t, d.Crash(sim.CrashPlan{Data: sim.DropUnsynced}), Config{SegmentMaxBytes: 1 << 20})
	if got := readValues(t, restarted, "orders", 0); len(got) != 60 {
		t.Fatalf("after a power loss: %d records, want the 60 acked", len(got))
	}
}

// TestDictionaries_ANewIncarnationNeverGetsTheOldSet: a topic recreated
// elsewhere (a cluster's other node; here the record's incarnation changed
// under the node) is met at the next open, which quarantines the old
// directory: the new incarnation's logs must not encode with the old
// incarnation's dictionary, whose file went with the old directory.
func TestDictionaries_ANewIncarnationNeverGetsTheOldSet(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{SegmentMaxBytes: 1 << 20})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	produceOneByOne(t, n, "orders", 0, 50)
	if _, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 50, MaxBytes: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	fresh, err := wire.NewIncarnationID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n.ms.mu.Lock()
	r := n.ms.topics["orders"]
	r.Incarnation = fresh
	n.ms.topics["orders"] = r
	n.ms.mu.Unlock()
	produceOneByOne(t, n, "orders", 0, 10) // opens the new incarnation's directory, quarantining the old

	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	// What a restart loads: the new directory's own dictionary files.
	topicDir := filepath.Join(dataDir, "topics", "orders")
	set, _, _, err := partition.ReadDictionaryFiles(d, topicDir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := partition.Open(filepath.Join(topicDir, "p00000"), partition.Options{FS: d, Dictionaries: set})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if res, err := l.Read(0, 100, 1<<20); err != nil || len(res.Records) != 10 {
		t.Fatalf("the new incarnation's records with its own directory's dictionaries: %v", err)
	}
}

// TestDictionaries_AQuarantinedIncarnationsTrainingStateIsForgotten: a
// topic recreated elsewhere, met at the next open (which quarantines the
// old directory), starts its automatic training afresh: the old
// incarnation's trained dictionary and its count are not the new one's,
// so the new incarnation trains its own once it has seen enough records.
func TestDictionaries_AQuarantinedIncarnationsTrainingStateIsForgotten(t *testing.T) {
	n := startNode(t, newTestDisk(t, 1), Config{SegmentMaxBytes: 4 << 20})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.SetDictionaryAfter(bg, "orders", MinDictionaryAfter); err != nil {
		t.Fatal(err)
	}
	produce := func(count int) {
		for i := range count {
			if _, err := n.Produce(bg, "orders", 0, orderRecords(i, 1)); err != nil {
				t.Fatal(err)
			}
		}
		n.background.Wait() // a training started in the background
	}
	produce(MinDictionaryAfter + autoCheckEvery)
	if infos, err := n.Dictionaries(bg, "orders"); err != nil || len(infos) != 1 {
		t.Fatalf("the first incarnation's automatic training: %+v, %v", infos, err)
	}
	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	fresh, err := wire.NewIncarnationID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n.ms.mu.Lock()
	r := n.ms.topics["orders"]
	r.Incarnation = fresh
	n.ms.topics["orders"] = r
	n.ms.mu.Unlock()
	produce(MinDictionaryAfter + autoCheckEvery) // the first opens the new incarnation's directory, quarantining the old
	if infos, err := n.Dictionaries(bg, "orders"); err != nil || len(infos) != 1 {
		t.Fatalf("the new incarnation after %d records: %+v, %v; want its own automatic dictionary", MinDictionaryAfter+autoCheckEvery, infos, err)
	}
}
