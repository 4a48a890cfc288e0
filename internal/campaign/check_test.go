package campaign

import (
	"context"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs/sim"
)

// TestCheck_ALieRelaxesOnlyWhatItCanCost: a lie on a consumer file costs
// no record and no metadata, so after it the deleted-incarnation check,
// the topic-gone check and I4 for a later incarnation still fail what
// they must (found by review: one global flag switched them all off).
func TestCheck_ALieRelaxesOnlyWhatItCanCost(t *testing.T) {
	served := map[int64]bool{}
	for o := int64(0); o < 10; o++ {
		served[o] = true
	}
	m := Model{Gens: []Gen{
		{Incarnation: "1111111111111111", Deleting: true, Deleted: true, Committed: 10, Written: 10, Honest: 10, Consumed: map[int64]bool{}},
		{Incarnation: "2222222222222222", Committed: 200, Written: 200, Honest: 200, Consumed: map[int64]bool{}},
	}}
	m.noteLie(sim.Call{Op: sim.OpSync, Path: path.Join(DataDir, "topics", Topic, "p00000", "consumer.ahead")})
	cases := map[string]observation{
		"the deleted incarnation 1 served":              {found: true, gen: 1, start: 0, hwm: 10, served: served},
		"incarnation 2 served empty, 200 acked missing": {found: true, gen: 2, start: 0, hwm: 0, served: map[int64]bool{}},
		"the topic gone":                                {},
	}
	for name, obs := range cases {
		if err := checkAgainst(obs, m, true); err == nil {
			t.Errorf("%s: passes after a lie on a consumer file", name)
		}
	}
	m.noteLie(sim.Call{Op: sim.OpSync, Path: path.Join(DataDir, "topics", Topic, "p00000", "00000000000000000000.log")})
	if m.metaLost() || !m.current().Lied || m.Gens[0].Lied {
		t.Errorf("a lie on a segment of incarnation 2: %+v", m)
	}
	m.noteLie(sim.Call{Op: sim.OpSync, Path: path.Join(DataDir, "metastore.json.tmp")})
	if m.metaLost() {
		t.Error("one lie on the metastore's file: its copy covers it, nothing may be lost")
	}
	m.noteLie(sim.Call{Op: sim.OpSync, Path: path.Join(DataDir, "metastore.json.copy.tmp")})
	if !m.metaLost() {
		t.Error("lies on both copies of the metastore's file: the record may be lost")
	}
}

// TestCheck_AReadEIODamageLooksAtTheDamagedDisk: when a read EIO fails a
// start, the check lifts the fault and looks at the same disk, so a start
// that destroyed data before failing is caught (found by review: the
// check looked at the clean disk and could not fail).
func TestCheck_AReadEIODamageLooksAtTheDamagedDisk(t *testing.T) {
	warmZstd(t)
	ctx := context.Background()
	var clean *sim.Disk
	var m Model
	bubble(t)(func() {
		w, err := newRun(1)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.workload(ctx, Variants[0], 1, Options{}); err != nil {
			t.Fatal(err)
		}
		clean, m = w.d.Crash(sim.CrashPlan{}), w.m
	})
	want, err := observe(ctx, clean.Crash(sim.CrashPlan{}), m, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	metastore := path.Join(DataDir, "metastore.json")
	dm := damage{file: metastore, sector: 0, kind: "read EIO", lost: map[int64]bool{},
		apply: func(d *sim.Disk) (*sim.Injection, error) {
			// Stands for a start that destroys data and then fails.
			if err := d.RemoveAll(path.Join(DataDir, "topics")); err != nil {
				return nil, err
			}
			return d.Inject(sim.Fault{Op: sim.OpRead, Path: metastore + "*", Err: syscall.EIO}), nil
		}}
	err = checkDamage(ctx, clean, dm, m, 1, want, false)
	if err == nil || !strings.Contains(err.Error(), "before the damage") {
		t.Errorf("every topic directory removed: the damage check says %v, want the bounds it lost", err)
	}
}
