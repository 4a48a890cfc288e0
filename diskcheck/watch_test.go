package diskcheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// TestWatch_NamesTheCallUnderWay: while a probe's fdatasync is held, the
// watch names it, the probe's file and when it began on the probe's
// clock; once the probe returns it names none.
func TestWatch_NamesTheCallUnderWay(t *testing.T) {
	f := newFake(t, ext4, time.Millisecond, time.Millisecond)
	base := f.disk.Hook()
	held, release := make(chan time.Time, 1), make(chan struct{})
	first := true
	f.disk.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpSync && first {
			first = false
			held <- f.clock.Now()
			<-release
		}
		return base(c)
	})
	opts := f.options()
	opts.Watch = &Watch{}
	done := make(chan error, 1)
	go func() {
		_, err := Probe(context.Background(), opts)
		done <- err
	}()
	began := <-held
	call, path, since, ok := opts.Watch.Current()
	if !ok || call != "fdatasync" || !strings.HasPrefix(path, dataDir+"/"+wire.DiskCheckProbePrefix) || !since.Equal(began) {
		t.Errorf("under a held flush: %q on %q since %v (%v), want fdatasync of the probe file since %v", call, path, since, ok, began)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if call, _, _, ok := opts.Watch.Current(); ok {
		t.Fatalf("after the probe: %q under way", call)
	}
	f.expectNoProbeFiles(t)
}
