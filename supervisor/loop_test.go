package supervisor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// advance moves the bubble's fake clock forward by d, then waits until every
// goroutine in the bubble is blocked again.
func advance(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

// testLoopConfig is a loop with a 10s interval and a 1m stall limit, logging
// into an observer.
func testLoopConfig() (LoopConfig, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return LoopConfig{
		Name:        "reaper",
		Interval:    10 * time.Second,
		StallAfter:  time.Minute,
		MaxRestarts: 2,
		CloseWait:   5 * time.Second,
		Logger:      zap.New(core),
	}, logs
}

func closeLoop(t *testing.T, l *Loop) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestLoopPassesRunEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, _ := testLoopConfig()
		var passes atomic.Int64
		l := StartLoop(cfg, func(ctx context.Context, p *PassContext) { passes.Add(1) })
		defer closeLoop(t, l)

		advance(cfg.Interval / 2)
		if got := passes.Load(); got != 0 {
			t.Fatalf("passes before the first Interval = %d, want 0", got)
		}
		advance(5 * cfg.Interval) // now at 5.5 intervals
		if got := passes.Load(); got != 5 {
			t.Fatalf("passes after 5.5 intervals = %d, want 5", got)
		}
		if got := testutil.ToFloat64(l.metrics.passes); got != 5 {
			t.Fatalf("passes_total = %v, want 5", got)
		}
	})
	goleak.VerifyNone(t)
}

func TestLoopPanicInPassIsContained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, logs := testLoopConfig()
		var passes atomic.Int64
		l := StartLoop(cfg, func(ctx context.Context, p *PassContext) {
			if passes.Add(1) == 1 {
				panic("sweep exploded")
			}
		})
		defer closeLoop(t, l)

		advance(cfg.Interval * 5 / 2) // 2.5 intervals: the panicking pass and one more
		if got := passes.Load(); got != 2 {
			t.Fatalf("passes = %d, want 2 (the loop goes on after a panic)", got)
		}
		if got := testutil.ToFloat64(l.metrics.panics); got != 1 {
			t.Fatalf("panics_total = %v, want 1", got)
		}
		entries := logs.FilterMessage("supervised loop recovered a panic").All()
		if len(entries) != 1 {
			t.Fatalf("panic log lines = %d, want 1", len(entries))
		}
		e := entries[0]
		if e.Level != zapcore.ErrorLevel {
			t.Errorf("panic logged at %v, want error", e.Level)
		}
		fields := e.ContextMap()
		if stack, _ := fields["stack"].(string); stack == "" {
			t.Errorf("panic log has no stack: %v", fields)
		}
		if fields["panic"] != "sweep exploded" || fields["loop"] != "reaper" {
			t.Errorf("panic log fields = %v", fields)
		}
	})
	goleak.VerifyNone(t)
}

func TestLoopItemPanicSkipsOnlyThatItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, logs := testLoopConfig()
		done := make(chan string, 10)
		l := StartLoop(cfg, func(ctx context.Context, p *PassContext) {
			for _, key := range []string{"a", "b", "c"} {
				p.Item(key, func() {
					if key == "b" {
						panic("partition b is broken")
					}
					done <- key
				})
			}
		})
		defer closeLoop(t, l)

		l.Trigger()
		synctest.Wait()
		close(done)
		var got []string
		for key := range done {
			got = append(got, key)
		}
		if !slices.Equal(got, []string{"a", "c"}) {
			t.Fatalf("items done = %v, want [a c]", got)
		}
		if got := testutil.ToFloat64(l.metrics.panics); got != 1 {
			t.Fatalf("panics_total = %v, want 1", got)
		}
		entries := logs.FilterMessage("supervised loop recovered a panic").All()
		if len(entries) != 1 {
			t.Fatalf("panic log lines = %d, want 1", len(entries))
		}
		fields := entries[0].ContextMap()
		if entries[0].Level != zapcore.ErrorLevel || fields["key"] != "b" || fields["stack"] == nil {
			t.Fatalf("item panic log = %v %v, want error with key b and a stack", entries[0].Level, fields)
		}
	})
	goleak.VerifyNone(t)
}

func TestLoopStalledPassIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, logs := testLoopConfig()
		var calls, finished atomic.Int64
		l := StartLoop(cfg, func(ctx context.Context, p *PassContext) {
			if calls.Add(1) == 1 {
				<-ctx.Done() // stalls, but respects its context
				return
			}
			finished.Add(1)
		})
		defer closeLoop(t, l)

		// The stalled pass starts at 10s; the watchdog replaces it at 70s.
		advance(cfg.Interval + cfg.StallAfter - time.Second)
		if got := testutil.ToFloat64(l.metrics.restarts); got != 0 {
			t.Fatalf("restarts before StallAfter = %v, want 0", got)
		}
		advance(2 * time.Second)
		if got := testutil.ToFloat64(l.metrics.restarts); got != 1 {
			t.Fatalf("restarts after StallAfter = %v, want 1", got)
		}
		if n := logs.FilterMessage("supervised loop stalled; worker replaced").Len(); n != 1 {
			t.Fatalf("replacement log lines = %d, want 1", n)
		}
		// The replacement runs its passes every Interval: at 81s, 91s, 101s.
		advance(3 * cfg.Interval)
		if got := finished.Load(); got != 3 {
			t.Fatalf("passes by the replacement = %d, want 3", got)
		}
	})
	goleak.VerifyNone(t)
}

func TestLoopBeatingPassIsNotReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, _ := testLoopConfig()
		var finished atomic.Int64
		l := StartLoop(cfg, func(ctx context.Context, p *PassContext) {
			// A five-minute pass that beats every 30s.
			for range 10 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(30 * time.Second):
					p.Beat()
				}
			}
			finished.Add(1)
		})
		defer closeLoop(t, l)

		advance(cfg.Interval + 5*time.Minute + time.Second)
		if got := testutil.ToFloat64(l.metrics.restarts); got != 0 {
			t.Fatalf("restarts = %v, want 0 for a pass that beats", got)
		}
		if got := finished.Load(); got != 1 {
			t.Fatalf("finished passes = %d, want 1", got)
		}
	})
	goleak.VerifyNone(t)
}

func TestLoopIdleLongerThanStallAfterIsNotReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, _ := testLoopConfig()
		cfg.Interval = time.Hour // waits far longer than StallAfter between passes
		var passes atomic.Int64
		l := StartLoop(cfg, func(ctx context.Context, p *PassContext) { passes.Add(1) })
		defer closeLoop(t, l)

		advance(3*time.Hour + time.Second)
		if got := testutil.ToFloat64(l.metrics.restarts); got != 0 {
			t.Fatalf("restarts = %v, want 0 for an idle worker", got)
		}
		if got := passes.Load(); got != 3 {
			t.Fatalf("passes = %d, want 3", got)
		}
	})
	goleak.VerifyNone(t)
}

func TestLoopRestartsPastCapAreTheAlarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, logs := testLoopConfig() // MaxRestarts 2
		l := StartLoop(cfg, func(ctx context.Context, p *PassContext) { <-ctx.Done() })
		defer closeLoop(t, l)

		// Every worker stalls 10s after it starts and is replaced 60s later.
		advance(4*(cfg.Interval+cfg.StallAfter) + time.Second)
		if got := testutil.ToFloat64(l.metrics.restarts); got != 4 {
			t.Fatalf("restarts = %v, want 4", got)
		}
		var levels []zapcore.Level
		for _, e := range logs.FilterMessage("supervised loop stalled; worker replaced").All() {
			levels = append(levels, e.Level)
		}
		want := []zapcore.Level{zapcore.WarnLevel, zapcore.WarnLevel, zapcore.ErrorLevel, zapcore.ErrorLevel}
		if !slices.Equal(levels, want) {
			t.Fatalf("replacement log levels = %v, want %v", levels, want)
		}
	})
	goleak.VerifyNone(t)
}

func TestLoopTriggerRunsAPassNowAndCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, _ := testLoopConfig()
		cfg.Interval = time.Hour
		release := make(chan struct{})
		var passes atomic.Int64
		l := StartLoop(cfg, func(ctx context.Context, p *PassContext) {
			passes.Add(1)
			<-release // the first pass holds until released; later ones run through
		})
		defer closeLoop(t, l)

		l.Trigger()
		synctest.Wait()
		if got := passes.Load(); got != 1 {
			t.Fatalf("passes after Trigger = %d, want 1 (no time has passed)", got)
		}
		for range 3 {
			l.Trigger() // while the pass runs: one pending pass
		}
		close(release)
		synctest.Wait()
		if got := passes.Load(); got != 2 {
			t.Fatalf("passes after 3 coalesced triggers = %d, want 2", got)
		}
		advance(cfg.Interval - time.Second)
		if got := passes.Load(); got != 2 {
			t.Fatalf("passes before the Interval elapsed = %d, want 2", got)
		}
	})
	goleak.VerifyNone(t)
}

func TestLoopCloseIsPromptWhilePassStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, _ := testLoopConfig()
		started := make(chan struct{})
		l := StartLoop(cfg, func(ctx context.Context, p *PassContext) {
			close(started)
			<-ctx.Done()
		})
		l.Trigger()
		<-started
		advance(cfg.StallAfter / 2) // stalled, not yet replaced

		begin := time.Now()
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if took := time.Since(begin); took != 0 {
			t.Fatalf("Close took %v of fake time, want 0", took)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
	goleak.VerifyNone(t)
}

func TestLoopCloseNamesWorkerIgnoringContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, _ := testLoopConfig()
		stuck := make(chan struct{})
		var calls atomic.Int64
		l := StartLoop(cfg, func(ctx context.Context, p *PassContext) {
			if calls.Add(1) == 1 {
				<-stuck // ignores ctx, like a read stuck on a dead disk
			}
		})
		advance(cfg.Interval + cfg.StallAfter + time.Second)
		if got := testutil.ToFloat64(l.metrics.restarts); got != 1 {
			t.Fatalf("restarts = %v, want 1", got)
		}

		begin := time.Now()
		err := l.Close()
		if !errors.Is(err, ErrLoopWorkerStuck) {
			t.Fatalf("Close = %v, want ErrLoopWorkerStuck", err)
		}
		if got, want := err.Error(), "reaper worker 1 still running"; !strings.Contains(got, want) {
			t.Fatalf("Close error %q does not name the stuck worker (%q)", got, want)
		}
		if strings.Contains(err.Error(), "worker 2") {
			t.Fatalf("Close error %q names the replacement, which stopped", err)
		}
		if took := time.Since(begin); took != cfg.CloseWait {
			t.Fatalf("Close waited %v, want CloseWait %v", took, cfg.CloseWait)
		}
		close(stuck) // let the abandoned worker finish so the bubble can end
	})
	goleak.VerifyNone(t)
}

func TestLoopMetricsNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, _ := testLoopConfig()
		reg := prometheus.NewRegistry()
		cfg.Registerer = reg
		l := StartLoop(cfg, func(ctx context.Context, p *PassContext) {})
		defer closeLoop(t, l)

		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range families {
			names = append(names, f.GetName())
		}
		want := []string{ // Gather sorts by name
			"narad_reaper_panics_total",
			"narad_reaper_pass_duration_seconds",
			"narad_reaper_passes_total",
			"narad_reaper_restarts",
		}
		if !slices.Equal(names, want) {
			t.Fatalf("metric names = %v, want %v", names, want)
		}

		// A second loop of the same name on the same registry shares them.
		again := StartLoop(cfg, func(ctx context.Context, p *PassContext) {})
		defer closeLoop(t, again)
		again.Trigger()
		synctest.Wait()
		if got := testutil.ToFloat64(l.metrics.passes); got != 1 {
			t.Fatalf("shared passes_total = %v, want 1", got)
		}
	})
	goleak.VerifyNone(t)
}
