package partition

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// TestDictionaryFile_CrashAtEveryCall: a power loss after any file call of
// storing a dictionary, with any unsynced state, leaves the topic with no
// dictionary or with the whole one, never a damaged file that loads; once
// the store returned, the dictionary is there.
func TestDictionaryFile_CrashAtEveryCall(t *testing.T) {
	dict := trainTestDictionary(t, 1)
	const dir = "/data/topics/orders"
	for stop := 1; ; stop++ {
		d := newDisk(t, uint64(stop))
		calls := 0
		d.SetHook(func(sim.Call) error {
			if calls++; calls == stop {
				return errors.New("stopped")
			}
			return nil
		})
		err := StoreDictionaryFile(d, dir, dict, 1234)
		d.SetHook(nil)
		var crashed []*sim.Disk
		for seed := range uint64(6) {
			crashed = append(crashed, d.Crash(sim.CrashPlan{Data: sim.TearUnsynced, Seed: seed, KeepNameOps: int(seed % 3)}))
		}
		crashed = append(crashed, d.Crash(sim.CrashPlan{Data: sim.KeepUnsynced, KeepNameOps: -1}), d.Crash(sim.CrashPlan{Data: sim.DropUnsynced}))
		for i, c := range crashed {
			set, infos, bad, err2 := ReadDictionaryFiles(c, dir)
			switch {
			case err2 != nil || len(bad) > 0:
				t.Fatalf("stop %d, crash %d: a damaged file or an unreadable directory: %v %v", stop, i, bad, err2)
			case len(infos) > 1:
				t.Fatalf("stop %d, crash %d: %d dictionaries loaded", stop, i, len(infos))
			case len(infos) == 1 && (infos[0].ID != dict.ID() || !set.Lookup(dict.ID()).Equal(dict) || set.Current() == nil):
				t.Fatalf("stop %d, crash %d: loaded %+v, not the dictionary stored", stop, i, infos[0])
			case err == nil && len(infos) == 0:
				t.Fatalf("stop %d, crash %d: the store returned nil and the crash lost the dictionary", stop, i)
			}
			// A leftover temporary never stops a later store.
			if err := StoreDictionaryFile(c, dir, dict, 1234); err != nil {
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
	dict, other := trainTestDictionary(t, 1), trainTestDictionary(t, 2)
	const dir = "/data/topics/orders"
	d := newDisk(t, 1)
	if err := StoreDictionaryFile(d, dir, dict, 1); err != nil {
		t.Fatal(err)
	}
	if err := StoreDictionaryFile(d, dir, dict, 2); err != nil {
		t.Fatalf("the same dictionary again: %v", err)
	}
	name, _ := wire.DictionaryFileName(dict.ID())
	good, _ := d.Contents(filepath.Join(dir, name))

	// other's bytes renamed to dict's id: conflict on store, left out on load.
	otherName, _ := wire.DictionaryFileName(other.ID())
	if err := StoreDictionaryFile(d, dir, other, 3); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename(filepath.Join(dir, otherName), filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	if err := StoreDictionaryFile(d, dir, dict, 4); err == nil {
		t.Fatal("storing over a file that holds another id succeeded")
	}
	if _, infos, bad, _ := ReadDictionaryFiles(d, dir); len(infos) != 0 || len(bad) != 1 {
		t.Fatalf("a file named for another id loaded: %+v, left out %v", infos, bad)
	}

	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x10
	if err := vfs.WriteFileAtomic(d, filepath.Join(dir, name), flipped); err != nil {
		t.Fatal(err)
	}
	if set, infos, bad, _ := ReadDictionaryFiles(d, dir); len(infos) != 0 || len(bad) != 1 || set.Lookup(dict.ID()) != nil {
		t.Fatalf("a damaged file loaded: %+v", infos)
	}
}

// TestDictionaryFile_StoreAfterAFailedDirectorySyncIsDurable: a store whose
// directory sync failed left the file renamed in place but its entry
// unsynced; a second store of the same dictionary (a training retried on
// the same records, a move's pull retried) must not return nil until the
// entry is durable, since frames will name the dictionary once it does.
func TestDictionaryFile_StoreAfterAFailedDirectorySyncIsDurable(t *testing.T) {
	dict := trainTestDictionary(t, 1)
	const dir = "/data/topics/orders"
	d := newDisk(t, 1)
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpSyncDir {
			return errors.New("EIO")
		}
		return nil
	})
	if err := StoreDictionaryFile(d, dir, dict, 1); err == nil {
		t.Fatal("the store succeeded with its directory sync failing")
	}
	d.SetHook(nil)
	if err := StoreDictionaryFile(d, dir, dict, 1); err != nil {
		t.Fatalf("storing again: %v", err)
	}
	crashed := d.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
	if _, infos, _, _ := ReadDictionaryFiles(crashed, dir); len(infos) != 1 {
		t.Fatalf("the second store returned nil, and a power loss after it lost the dictionary (%d loaded)", len(infos))
	}
}
