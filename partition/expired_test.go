package partition

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestExpired_SaysWhetherASweepHasWork: false with no retention or nothing
// old enough; true once the idle active segment or a sealed one is past
// the bound; false again after the sweep did the work.
func TestExpired_SaysWhetherASweepHasWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := testOptions(d)
		opts.RetentionMaxAge = time.Hour
		l := openLog(t, opts)
		defer closeLog(t, l)
		expired := func() bool {
			ok, err := l.Expired(bg)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if expired() {
			t.Fatal("an empty log has expired segments")
		}
		if _, err := l.Produce(bg, records(1, 0, 3)); err != nil {
			t.Fatal(err)
		}
		if expired() {
			t.Fatal("a fresh record counted as expired")
		}
		<-time.After(time.Hour + time.Second)
		if !expired() {
			t.Fatal("an idle active segment past the bound is not reported")
		}
		if _, err := l.Sweep(bg); err != nil {
			t.Fatal(err)
		}
		if expired() {
			t.Fatal("expired after the sweep did the work")
		}
	})
}
