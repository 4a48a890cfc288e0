package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// TestMetastore_EveryBitFlipIsFoundAndTheCopyServes: the embedded
// metastore's file is checksummed, so a flip of any bit of it is
// ErrMetastoreDamaged, never a record read with a different retention
// bound, partition count or incarnation id, nor an empty metastore whose
// topics' directories the orphan sweep would then purge; its second copy
// then serves, and with both damaged the records are rebuilt from the
// topic directories (found by the fault campaign: a damaged byte either
// failed the JSON parse by luck or changed a record silently, and lying
// fsyncs of the files left a node that could not start).
func TestMetastore_EveryBitFlipIsFoundAndTheCopyServes(t *testing.T) {
	d := newTestDisk(t, 3)
	ms := metastoreWithTopic(t, d, 3, 60000)
	path := filepath.Join(dataDir, metastoreFile)
	clean, err := d.Contents(path)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dataDir, metastoreCopy)
	for i := range clean {
		for bit := range 8 {
			damaged := append([]byte(nil), clean...)
			damaged[i] ^= 1 << bit
			if err := d.Damage(path, 0, damaged); err != nil {
				t.Fatal(err)
			}
			if _, err := decodeMetastore(damaged); !errors.Is(err, ErrMetastoreDamaged) {
				t.Fatalf("byte %d (%q) bit %d flipped: %v, want ErrMetastoreDamaged", i, clean[i], bit, err)
			}
			// The copy serves instead, and says so.
			again, err := OpenLocalMetastore(d, dataDir)
			if err != nil || again.Recovered() == "" {
				t.Fatalf("byte %d bit %d flipped: open %v, recovered %q; want the copy served", i, bit, err, again.Recovered())
			}
			if got, ok, _ := again.Topic(bg, "orders"); !ok || got.RetentionMs != 60000 {
				t.Fatalf("the copy serves %+v, %v", got, ok)
			}
		}
	}
	// Both damaged: never an empty metastore over the topic directories
	// (a sweep would purge them): the records are rebuilt from them, with
	// retention keep-forever.
	want, _, _ := ms.Topic(bg, "orders")
	topicDir := filepath.Join(dataDir, wire.TopicsDirName, "orders")
	if err := d.MkdirAll(filepath.Join(topicDir, "p00002")); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(d, filepath.Join(topicDir, wire.IncarnationFileName), []byte(want.Incarnation+"\n")); err != nil {
		t.Fatal(err)
	}
	if err := d.Damage(copyPath, 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"both files damaged", "file gone, copy damaged"} {
		if step == "file gone, copy damaged" {
			if err := d.Remove(path); err != nil {
				t.Fatal(err)
			}
		}
		rebuilt, err := OpenLocalMetastore(d, dataDir)
		if err != nil || rebuilt.Recovered() == "" {
			t.Fatalf("%s: %v, recovered %q; want the records rebuilt", step, err, rebuilt.Recovered())
		}
		got, ok, _ := rebuilt.Topic(bg, "orders")
		if !ok || got.Incarnation != want.Incarnation || got.Partitions != 3 || got.RetentionMs != 0 {
			t.Fatalf("%s: rebuilt %+v (%v), want orders, incarnation %s, 3 partitions, keep forever", step, got, ok, want.Incarnation)
		}
	}
	if err := d.Damage(copyPath, 0, clean); err != nil {
		t.Fatal(err)
	}
	again, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := again.Topic(bg, "orders"); !ok || got != want {
		t.Fatalf("reloaded %+v, want %+v", got, want)
	}
}

// FuzzDecodeMetastore: any bytes decode to a state or ErrMetastoreDamaged,
// never a panic, and what decodes encodes back to a file that decodes to
// the same state.
func FuzzDecodeMetastore(f *testing.F) {
	good, _ := encodeMetastore(metastoreState{Version: 4, Topics: []TopicRecord{{Name: "orders", Incarnation: "0123456789abcdef", Partitions: 2, RetentionMs: 1000, Version: 4}}})
	f.Add(good)
	f.Add([]byte(`{"version":1,"topics":[]}`))
	f.Add([]byte(`{"crc32c":"00000000","state":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeMetastore(b)
		if err != nil {
			if !errors.Is(err, ErrMetastoreDamaged) {
				t.Fatalf("error %v is not ErrMetastoreDamaged", err)
			}
			return
		}
		again, err := encodeMetastore(st)
		if err != nil {
			t.Fatal(err)
		}
		st2, err := decodeMetastore(again)
		if err != nil || !reflect.DeepEqual(st, st2) {
			t.Fatalf("round trip: %+v, %v; want %+v", st2, err, st)
		}
	})
}

// TestMetastore_ALyingFsyncOfTheFileLosesNoChange: the fsync of the
// file's new content lies and a power loss follows the rename: the file
// reads empty, and the copy, written after it, serves the change (the
// fault campaign found the node refusing to start there).
func TestMetastore_ALyingFsyncOfTheFileLosesNoChange(t *testing.T) {
	d := newTestDisk(t, 5)
	ms := metastoreWithTopic(t, d, 1, 1000)
	lie := d.Inject(sim.Fault{Op: sim.OpSync, Path: filepath.Join(dataDir, metastoreFile+".tmp"), Nth: 1, Lie: true})
	if _, err := ms.SetRetention(bg, "orders", Retention{Ms: 2000}); err != nil {
		t.Fatal(err)
	}
	if lie.Fired() != 1 {
		t.Fatalf("the lie fired %d times", lie.Fired())
	}
	crashed := d.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
	again, err := OpenLocalMetastore(crashed, dataDir)
	if err != nil {
		t.Fatalf("open after the lie and a power loss: %v", err)
	}
	if got, ok, _ := again.Topic(bg, "orders"); !ok || got.RetentionMs != 2000 || again.Recovered() == "" {
		t.Fatalf("serves %+v (%v), recovered %q; want retention 2000 from the copy", got, ok, again.Recovered())
	}
}

// TestMetastore_AStaleTemporaryAndALyingFsyncLoseNoChange: a crash between
// metastore.json.tmp's fsync and its rename leaves a valid temporary file
// holding a change that never returned. The next change rewrites the
// temporary (a new file: truncating the old one kept its content under a
// lost write) with a version never used before, and after one lying fsync
// and a power loss the copy, holding the higher version, is the one loaded
// (found by review: the file decoded, stale, and was preferred).
func TestMetastore_AStaleTemporaryAndALyingFsyncLoseNoChange(t *testing.T) {
	d := newTestDisk(t, 7)
	ms := metastoreWithTopic(t, d, 1, 1000)
	tmp := filepath.Join(dataDir, metastoreFile+vfs.TempSuffix)
	// Boot 1 dies at the rename of retention 2000's temporary file: a
	// power loss that kept the namespace changes (the temporary's entry).
	var image *sim.Disk
	errCrash := errors.New("power loss")
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpRename && c.Path == tmp && image == nil {
			image = d.Crash(sim.CrashPlan{KeepNameOps: -1})
			return errCrash
		}
		return nil
	})
	if _, err := ms.SetRetention(bg, "orders", Retention{Ms: 2000}); !errors.Is(err, errCrash) {
		t.Fatalf("SetRetention(2000): %v, want the simulated crash", err)
	}
	d.SetHook(nil)
	// Boot 2: retention 3000 returns; the fsync of the temporary lies once.
	ms2, err := OpenLocalMetastore(image, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := ms2.Topic(bg, "orders"); got.RetentionMs != 1000 {
		t.Fatalf("boot 2 starts with retention %d, want 1000", got.RetentionMs)
	}
	lie := image.Inject(sim.Fault{Op: sim.OpSync, Path: tmp, Nth: 1, Lie: true})
	if _, err := ms2.SetRetention(bg, "orders", Retention{Ms: 3000}); err != nil {
		t.Fatal(err)
	}
	if lie.Fired() != 1 {
		t.Fatalf("the lie fired %d times", lie.Fired())
	}
	// Power loss; boot 3.
	ms3, err := OpenLocalMetastore(image.Crash(sim.CrashPlan{Data: sim.DropUnsynced}), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := ms3.Topic(bg, "orders"); got.RetentionMs != 3000 {
		t.Fatalf("after one lying fsync: retention %d (recovered %q), want 3000, the change that returned", got.RetentionMs, ms3.Recovered())
	}
}

// TestMetastore_AFirstWriteLostBeforeItsCopyStartsEmpty: a lying fsync of
// the file's very first write and a power loss before the copy was ever
// written leave a damaged file and no copy. With no topic directory yet
// the metastore starts empty, and says so (the long campaign found a node
// that could not start).
func TestMetastore_AFirstWriteLostBeforeItsCopyStartsEmpty(t *testing.T) {
	d := newTestDisk(t, 9)
	path := filepath.Join(dataDir, metastoreFile)
	f, err := d.OpenFile(path, os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 40)) // the size reached the media, the data did not
	f.Close()
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil || ms.Recovered() == "" {
		t.Fatalf("no copy, no topic directory: %v, recovered %q; want an empty metastore, said so", err, ms.Recovered())
	}
	if topics, _ := ms.Topics(bg); len(topics) != 0 {
		t.Fatalf("started with %v", topics)
	}
	d.Inject(sim.Fault{Op: sim.OpRead, Path: path, Err: syscall.EIO})
	if _, err := OpenLocalMetastore(d, dataDir); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the file failing reads: %v, want the I/O error, not a rebuild", err)
	}
}

// metastoreWithTopic opens the embedded metastore on d and creates the
// topic "orders" in it.
func metastoreWithTopic(t *testing.T, d *sim.Disk, partitions int, retentionMs int64) *LocalMetastore {
	t.Helper()
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ms.CreateTopic(bg, "orders", partitions, Retention{Ms: retentionMs}); err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestServedAlone_SaysWhetherTheDirectoryHoldsTheEmbeddedMetastore: a data
// directory a node alone served holds its metastore file; one a cluster's
// node served does not.
func TestServedAlone_SaysWhetherTheDirectoryHoldsTheEmbeddedMetastore(t *testing.T) {
	d := newTestDisk(t, 1)
	if alone, err := ServedAlone(d, dataDir); alone || err != nil {
		t.Fatalf("a fresh directory: %v, %v", alone, err)
	}
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ms.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if alone, err := ServedAlone(d, dataDir); !alone || err != nil {
		t.Fatalf("after a local topic: %v, %v", alone, err)
	}
}
