package runtime

import (
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/narad-io/storage/internal/crashtest"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/tool"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The tests of this file are a cluster's node that was marked lost and
// whose partitions an operator reassigned meanwhile: its copies are set
// aside under lost/, never removed.

// setAsideNode starts a node over a fresh disk with topic "orders" of
// partitions partitions, every one this node's but foreign until the
// test says otherwise (ms.foreign).
func setAsideNode(t *testing.T, partitions int, cfg Config, foreign ...supervisor.Key) (*testNode, *testMetastore) {
	t.Helper()
	var ms *testMetastore
	create := func(local *LocalMetastore) {
		if _, _, err := local.CreateTopic(bg, "orders", partitions, Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	n := startNodeWith(t, nil, cfg, func(local *LocalMetastore) Metastore {
		ms = foreignOwner(create, foreign...)(local).(*testMetastore)
		return ms
	})
	return n, ms
}

// valuesOf is what recs gives a partition's first count records.
func valuesOf(topic string, p, count int) []string {
	var out []string
	for _, r := range recs(topic, p, 0, count) {
		out = append(out, string(r.Value))
	}
	return out
}

// logValues opens the partition directory dir as a log of its own
// (partition.Open, no node) and reads every record's value.
func logValues(t *testing.T, files vfs.FS, dir string) []string {
	t.Helper()
	l, err := partition.Open(dir, partition.Options{FS: files})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Errorf("close %s: %v", dir, err)
		}
	}()
	var out []string
	for offset := l.StartOffset(); ; {
		res, err := l.Read(offset, 1000, 1<<20)
		if err != nil {
			t.Fatalf("read %s at %d: %v", dir, offset, err)
		}
		for _, r := range res.Records {
			out = append(out, string(r.Value))
		}
		if res.Next >= res.HighWatermark {
			return out
		}
		offset = res.Next
	}
}

// lostDirOf is where the set-aside copies of the topic's incarnation go.
func lostDirOf(t *testing.T, n *testNode, topic string) string {
	t.Helper()
	rec, ok, err := n.ms.Topic(bg, topic)
	if err != nil || !ok {
		t.Fatalf("the record of %s: %v, %v", topic, ok, err)
	}
	return filepath.Join(dataDir, wire.LostDirName, topic+"."+string(rec.Incarnation))
}

// entryNames lists a directory's names; a missing directory has none.
func entryNames(t *testing.T, d vfs.FS, dir string) []string {
	t.Helper()
	entries, err := d.ReadDir(dir)
	if err != nil {
		if ok, _ := vfs.Exists(d, dir); !ok {
			return nil
		}
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}

// TestSetAsidePartition_MovesTheCopyOutOfTheServedTree: a partition
// reassigned while the node was lost is moved, whole, to
// lost/<topic>.<incarnation>/p00000.<unix ms>, durably (a power loss
// right after keeps it there), its records readable by a log opened
// there; the node no longer serves it, the topic's other partition still
// does, and the move is logged at warn with its path.
func TestSetAsidePartition_MovesTheCopyOutOfTheServedTree(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	n, ms := setAsideNode(t, 2, Config{SegmentMaxBytes: 1 << 10, Logger: zap.New(core)})
	for p := range 2 {
		if _, err := n.Produce(bg, "orders", p, recs("orders", p, 0, 40)); err != nil {
			t.Fatal(err)
		}
	}
	segments := segmentsOf(t, n.disk, "orders", 0)
	if len(segments) < 2 {
		t.Fatalf("fixture: %d segments, want several", len(segments))
	}
	ms.set(func(m *testMetastore) { m.foreign[key("orders", 0)] = true }) // reassigned while the node was lost

	moved, err := n.SetAsidePartition(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	lost := lostDirOf(t, n, "orders")
	if ok, _ := regexp.MatchString(`^p00000\.[0-9]{13}$`, filepath.Base(moved)); !ok || filepath.Dir(moved) != lost {
		t.Fatalf("set aside to %s, want %s/p00000.<unix ms>", moved, lost)
	}
	if ok, _ := vfs.Exists(n.disk, partitionPath("orders", 0)); ok {
		t.Fatal("the partition's directory is still under topics/")
	}
	if _, open := n.reg.Lookup(key("orders", 0)); open {
		t.Fatal("the set-aside partition's log is open")
	}
	afterPowerLoss := n.disk.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
	var got []string
	for _, name := range entryNames(t, afterPowerLoss, moved) {
		if _, err := wire.ParseSegmentFileName(name); err == nil {
			got = append(got, name)
		}
	}
	if !slices.Equal(got, segments) {
		t.Fatalf("segments set aside (after a power loss): %v, want %v", got, segments)
	}
	if got, want := logValues(t, afterPowerLoss, moved), valuesOf("orders", 0, 40); !slices.Equal(got, want) {
		t.Fatalf("the set-aside copy holds %d records %v, want the 40 acked", len(got), got)
	}
	if _, err := n.Read(bg, "orders", 0, 0, 10, 1<<20); !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("a read of the set-aside partition: %v, want ErrNotAssigned", err)
	}
	if got := readValues(t, n, "orders", 1); !slices.Equal(got, valuesOf("orders", 1, 40)) {
		t.Fatalf("the other partition serves %d records, want its 40", len(got))
	}
	warned := logs.FilterMessage("set aside this node's copy of a partition reassigned while it was lost").All()
	if len(warned) != 1 || warned[0].Level != zapcore.WarnLevel || warned[0].ContextMap()["path"] != moved ||
		warned[0].ContextMap()["topic"] != "orders" || warned[0].ContextMap()["partition"] != int64(0) {
		t.Fatalf("the set-aside's log: %v", warned)
	}
}

// TestSetAsidePartition_RefusesWhatTheNodeStillOwns: a partition the
// metastore assigns this node, or one being received, is refused and its
// directory left in place, serving; a partition with no directory here is
// nothing to do, and makes no lost/ directory.
func TestSetAsidePartition_RefusesWhatTheNodeStillOwns(t *testing.T) {
	n, ms := setAsideNode(t, 2, Config{}, key("orders", 1)) // partition 1 never opened here
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 5)); err != nil {
		t.Fatal(err)
	}
	if moved, err := n.SetAsidePartition(bg, "orders", 0); !errors.Is(err, ErrAssigned) || moved != "" {
		t.Fatalf("setting aside an owned partition: %q, %v; want ErrAssigned", moved, err)
	}
	if ok, _ := vfs.Exists(n.disk, partitionPath("orders", 0)); !ok {
		t.Fatal("a refused set-aside moved the directory")
	}
	if got := readValues(t, n, "orders", 0); !slices.Equal(got, valuesOf("orders", 0, 5)) {
		t.Fatalf("after a refused set-aside the partition serves %v", got)
	}

	rec, _, err := n.ms.Topic(bg, "orders")
	if err != nil {
		t.Fatal(err)
	}
	r, err := n.ReceivePartition(bg, "orders", 0, rec.Incarnation)
	if err != nil {
		t.Fatal(err)
	}
	ms.set(func(m *testMetastore) { m.foreign[key("orders", 0)] = true })
	if _, err := n.SetAsidePartition(bg, "orders", 0); !errors.Is(err, ErrReceiveInProgress) {
		t.Fatalf("setting aside a partition being received: %v, want ErrReceiveInProgress", err)
	}
	if err := r.Abort(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := vfs.Exists(n.disk, partitionPath("orders", 0)); !ok {
		t.Fatal("a refused set-aside moved the directory")
	}

	if moved, err := n.SetAsidePartition(bg, "orders", 1); err != nil || moved != "" {
		t.Fatalf("setting aside a partition with no directory: %q, %v; want nothing done", moved, err)
	}
	if ok, _ := vfs.Exists(n.disk, filepath.Join(dataDir, wire.LostDirName)); ok {
		t.Fatal("a set-aside with nothing to move made lost/")
	}
}

// TestSetAsidePartition_IsWholeInOnePlaceAtEveryCrash: at every crash
// point of a set-aside, the partition's records are whole in exactly one
// place, topics/ or lost/, never in both and never lost; a restarted node
// that does not own the partition leaves both places as they are (no
// sweep or settle touches lost/), and one that owns it starts cleanly.
func TestSetAsidePartition_IsWholeInOnePlaceAtEveryCrash(t *testing.T) {
	n, ms := setAsideNode(t, 2, Config{SegmentMaxBytes: 1 << 10})
	for p := range 2 {
		if _, err := n.Produce(bg, "orders", p, recs("orders", p, 0, 40)); err != nil {
			t.Fatal(err)
		}
	}
	ms.set(func(m *testMetastore) { m.foreign[key("orders", 0)] = true })
	lost := lostDirOf(t, n, "orders")
	explore := crashtest.NewExplorer(n.disk, func() struct{} { return struct{}{} })
	explore.Run(func() {
		if _, err := n.SetAsidePartition(bg, "orders", 0); err != nil {
			t.Fatal(err)
		}
	})
	want := valuesOf("orders", 0, 40)
	final := partitionPath("orders", 0)
	// where is the one place the partition's copy is on d.
	where := func(d *sim.Disk, label string) string {
		t.Helper()
		places := entryNames(t, d, lost)
		for i, name := range places {
			places[i] = filepath.Join(lost, name)
		}
		if ok, _ := vfs.Exists(d, final); ok {
			places = append(places, final)
		}
		if len(places) != 1 {
			t.Fatalf("%s: the partition's copy is in %d places: %v", label, len(places), places)
		}
		return places[0]
	}
	for _, img := range explore.Images() {
		// A node of the cluster, which no longer owns the partition: it
		// opens nothing of it, so the files are the set-aside's alone.
		before := where(img.Disk, img.Label)
		other := startImageWith(t, img.Disk, foreignOwner(nil, key("orders", 0)))
		assertNoInstallLeftovers(t, other.disk, img.Label)
		other.SweepQuarantine(bg)
		if err := other.Close(); err != nil {
			t.Fatalf("%s: close: %v", img.Label, err)
		}
		if after := where(img.Disk, img.Label); after != before {
			t.Fatalf("%s: a restart moved the copy from %s to %s", img.Label, before, after)
		}
		if got := logValues(t, img.Disk, before); !slices.Equal(got, want) {
			t.Fatalf("%s: the copy in %s holds %d records, want the 40 acked", img.Label, before, len(got))
		}
		// A node that owns the partition (a single node's metastore)
		// starts cleanly, and serves the copy when topics/ holds it.
		owner := startImage(t, img.Disk)
		assertNoInstallLeftovers(t, owner.disk, img.Label)
		if before == final {
			if got := readValues(t, owner, "orders", 0); !slices.Equal(got, want) {
				t.Fatalf("%s: the partition serves %d records, want its 40", img.Label, len(got))
			}
		}
		if got := readValues(t, owner, "orders", 1); len(got) != 40 {
			t.Fatalf("%s: the other partition serves %d records, want its 40", img.Label, len(got))
		}
		if err := owner.Close(); err != nil {
			t.Fatalf("%s: close: %v", img.Label, err)
		}
	}
	t.Logf("set-aside crash states: %d", len(explore.Images()))
}

// startImageWith starts a fresh node on a crash image, its metastore
// wrapped by wrap.
func startImageWith(t *testing.T, d *sim.Disk, wrap func(*LocalMetastore) Metastore) *testNode {
	t.Helper()
	local, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{DataDir: dataDir, FS: d, SegmentMaxBytes: 1 << 10, Testing: checkLockOrder, Metastore: wrap(local)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		n.Close()
		t.Fatal(err)
	}
	return &testNode{Node: n, disk: d, ms: local}
}

// TestSetAsidePartition_NeverOverwritesAnEarlierCopy: a partition set
// aside, made again here (owned again for a while, and produced to) and
// set aside again, at the same millisecond (the bubble's clock stands
// still), keeps both copies: the second takes the name with "-1", the
// third "-2", each holding its own records.
func TestSetAsidePartition_NeverOverwritesAnEarlierCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, ms := setAsideNode(t, 1, Config{})
		var copies []string
		for round := range 3 {
			ms.set(func(m *testMetastore) { delete(m.foreign, key("orders", 0)) }) // this node's again
			if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3+round)); err != nil {
				t.Fatal(err)
			}
			ms.set(func(m *testMetastore) { m.foreign[key("orders", 0)] = true })
			moved, err := n.SetAsidePartition(bg, "orders", 0)
			if err != nil {
				t.Fatal(err)
			}
			copies = append(copies, moved)
		}
		if copies[1] != copies[0]+"-1" || copies[2] != copies[0]+"-2" {
			t.Fatalf("copies set aside at one millisecond: %v; want the first's name, then -1 and -2", copies)
		}
		for round, dir := range copies {
			if got, want := logValues(t, n.disk, dir), valuesOf("orders", 0, 3+round); !slices.Equal(got, want) {
				t.Fatalf("copy %d (%s) holds %v, want %v", round, dir, got, want)
			}
		}
		if got := entryNames(t, n.disk, lostDirOf(t, n, "orders")); len(got) != 3 {
			t.Fatalf("lost/ holds %v, want the 3 copies", got)
		}
	})
}

// TestSetAsidePartition_TakesTheTopicsDictionaries: a set-aside copy whose
// frames name a dictionary of the topic gets the topic's dictionary files
// beside it (lost/<topic>.<incarnation>/dictionary.<id>), durably: after
// the topic is deleted and a power loss, inspect still decodes every
// zstd-dict frame of the copy.
func TestSetAsidePartition_TakesTheTopicsDictionaries(t *testing.T) {
	n, ms := setAsideNode(t, 1, Config{SegmentMaxBytes: 1 << 20})
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 50)); err != nil {
		t.Fatal(err)
	}
	info, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 50, MaxBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 50+i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	lost := lostDirOf(t, n, "orders")
	ms.set(func(m *testMetastore) { m.foreign[key("orders", 0)] = true })
	moved, err := n.SetAsidePartition(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	afterPowerLoss := n.disk.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
	name, _ := wire.DictionaryFileName(info.ID)
	if !slices.Contains(entryNames(t, afterPowerLoss, lost), name) {
		t.Fatalf("%s holds %v after a power loss, want %s", lost, entryNames(t, afterPowerLoss, lost), name)
	}
	var out strings.Builder
	for _, seg := range entryNames(t, afterPowerLoss, moved) {
		if _, err := wire.ParseSegmentFileName(seg); err != nil {
			continue
		}
		problems, err := tool.Inspect(&out, tool.InspectOptions{Segment: filepath.Join(moved, seg), Records: true, FS: afterPowerLoss})
		if problems != 0 || err != nil {
			t.Fatalf("inspect %s: %d problems, %v:\n%s", seg, problems, err, out.String())
		}
	}
	if got := strings.Count(out.String(), " codec: zstd-dict "); got != 10 {
		t.Fatalf("inspect decoded %d zstd-dict frames of the set-aside copy, want 10:\n%s", got, out.String())
	}
}

// TestSetAsidePartition_DictionariesAtEveryCrash: at every crash point of
// a set-aside of a partition whose frames name a dictionary, the copy is
// whole in one place and every zstd-dict frame of it decodes there: in
// topics/ with the topic's files, in lost/ with the ones set aside beside
// it (never a copy in lost/ without its dictionary).
func TestSetAsidePartition_DictionariesAtEveryCrash(t *testing.T) {
	n, ms := setAsideNode(t, 1, Config{SegmentMaxBytes: 1 << 20})
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 50)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 50, MaxBytes: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 50+i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	lost := lostDirOf(t, n, "orders")
	ms.set(func(m *testMetastore) { m.foreign[key("orders", 0)] = true })
	explore := crashtest.NewExplorer(n.disk, func() struct{} { return struct{}{} })
	explore.Run(func() {
		if _, err := n.SetAsidePartition(bg, "orders", 0); err != nil {
			t.Fatal(err)
		}
	})
	final := partitionPath("orders", 0)
	inLost := 0
	for _, img := range explore.Images() {
		var places []string
		for _, name := range entryNames(t, img.Disk, lost) {
			if p, _, _ := strings.Cut(name, "."); p == "p00000" {
				places = append(places, filepath.Join(lost, name))
			}
		}
		if ok, _ := vfs.Exists(img.Disk, final); ok {
			places = append(places, final)
		}
		if len(places) != 1 {
			t.Fatalf("%s: the copy is in %d places: %v", img.Label, len(places), places)
		}
		if places[0] == final {
			continue
		}
		inLost++
		var out strings.Builder
		for _, seg := range entryNames(t, img.Disk, places[0]) {
			if _, err := wire.ParseSegmentFileName(seg); err != nil {
				continue
			}
			problems, err := tool.Inspect(&out, tool.InspectOptions{Segment: filepath.Join(places[0], seg), Records: true, FS: img.Disk})
			if problems != 0 || err != nil {
				t.Fatalf("%s: inspect %s: %d problems, %v:\n%s", img.Label, seg, problems, err, out.String())
			}
		}
		if got := strings.Count(out.String(), " codec: zstd-dict "); got != 10 {
			t.Fatalf("%s: %d zstd-dict frames of the copy in lost/ decoded, want 10", img.Label, got)
		}
	}
	if inLost == 0 {
		t.Fatal("no crash image holds the copy in lost/")
	}
	t.Logf("crash states: %d, %d with the copy in lost/", len(explore.Images()), inLost)
}

// TestSetAsidePartition_ADamagedDictionaryInLostNeverBlocksIt: lost/ is
// the operator's and never scrubbed; a dictionary file there under one of
// the topic's ids that no longer checks out must not keep the copy in
// topics/ (a node marked lost would then fail to clear its mark and
// rejoin): the set-aside goes through.
func TestSetAsidePartition_ADamagedDictionaryInLostNeverBlocksIt(t *testing.T) {
	n, ms := setAsideNode(t, 1, Config{SegmentMaxBytes: 1 << 20})
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 50)); err != nil {
		t.Fatal(err)
	}
	info, err := n.TrainDictionary(bg, "orders", DictionaryTraining{Samples: 50, MaxBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	lost := lostDirOf(t, n, "orders")
	if err := vfs.MkdirAllDurable(n.disk, lost); err != nil {
		t.Fatal(err)
	}
	name, _ := wire.DictionaryFileName(info.ID)
	if err := vfs.WriteFileAtomic(n.disk, filepath.Join(lost, name), []byte("rotten")); err != nil {
		t.Fatal(err)
	}
	ms.set(func(m *testMetastore) { m.foreign[key("orders", 0)] = true })
	moved, err := n.SetAsidePartition(bg, "orders", 0)
	if err != nil || moved == "" {
		t.Fatalf("set-aside with a damaged dictionary file in lost/: %q, %v", moved, err)
	}
}
