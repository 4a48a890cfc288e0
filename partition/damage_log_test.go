package partition

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/vfs/sim"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestRead_DamageIsLoggedOncePerPlace: a read that meets a damaged frame
// logs it at warn, with the segment, the byte and the offsets, the first
// time only (every read of it is counted in errors_total); the log is
// bounded however many places are damaged.
func TestRead_DamageIsLoggedOncePerPlace(t *testing.T) {
	const seed = 27
	d := sim.NewDisk(seed)
	l := openLog(t, testOptions(d))
	produceRecords(t, l, seed, 0, 400, 3)
	closeLog(t, l)
	path := segmentPathOf(t, segmentBases(t, d)[0]) // sealed: read, not recovered
	frames := framesIn(t, d, path)
	victim := frames[1]
	b, _ := d.Contents(path)
	at := victim.pos + int64(victim.size) - 1
	if err := d.Damage(path, at, []byte{b[at] ^ 1}); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	metrics := NewMetrics(prometheus.NewRegistry())
	opts := testOptions(d)
	opts.Metrics, opts.Logger = metrics, zap.New(core)
	l = openLog(t, opts)
	defer closeLog(t, l)
	for range 3 {
		var u *UnreadableError
		if _, err := l.Read(victim.base, 10, 1<<20); !errors.As(err, &u) {
			t.Fatalf("read in the damaged frame: %v", err)
		}
	}
	got := logs.FilterMessageSnippet("damaged frame").All()
	if len(got) != 1 {
		t.Fatalf("%d warnings for one damaged frame read 3 times, want 1", len(got))
	}
	fields := got[0].ContextMap()
	if fields["segment"] != filepath.Base(path) || fields["offset"] != victim.base || fields["next_offset"] != victim.end() || fields["byte"] != victim.pos {
		t.Fatalf("warning fields %v; want segment %s, byte %d, offsets %d..%d", fields, filepath.Base(path), victim.pos, victim.base, victim.end())
	}
	if n := testutil.ToFloat64(metrics.Errors.WithLabelValues("storage", kindReadCorrupt)); n != 3 {
		t.Fatalf("errors_total{kind=read_corrupt} = %v, want 3 (every read counted)", n)
	}

	var dl damageLog
	for i := range 10 * maxDamageLogged {
		dl.first(damagePlace{segment: 0, pos: int64(i)})
		if len(dl.logged) > maxDamageLogged {
			t.Fatalf("the damage log holds %d places, over its bound %d", len(dl.logged), maxDamageLogged)
		}
	}
}

// TestMetrics_EverySeriesAnAlertNamesExistsAtZero: every kind of
// errors_total and the retention counters' reason="age" exist from the
// start, at zero: an alert can be written before the failure it catches.
func TestMetrics_EverySeriesAnAlertNamesExistsAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, lp := range m.GetLabel() {
				name += "," + lp.GetName() + "=" + lp.GetValue()
			}
			found[name] = m.GetCounter().GetValue()
		}
	}
	want := []string{
		"narad_storage_retention_deleted_bytes_total,reason=age",
		"narad_storage_retention_deleted_records_total,reason=age",
		"narad_storage_retention_deleted_bytes_total,reason=size",
		"narad_storage_retention_deleted_records_total,reason=size",
	}
	for _, kind := range []string{kindFsyncPoisoned, kindRetentionUnlink, kindCommitFailed, kindWriteFailed, kindReadCorrupt, kindHWMFile} {
		want = append(want, "errors_total,component=storage,kind="+kind)
	}
	for _, w := range want {
		if v, ok := found[w]; !ok || v != 0 {
			t.Errorf("%s: present %v, value %v; want present at 0", w, ok, v)
		}
	}
}
