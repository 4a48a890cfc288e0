package supervisor

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/internal/promshare"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// ErrLoopWorkerStuck is returned by Loop.Close when a worker did not return
// within LoopConfig.CloseWait after its context was cancelled.
var ErrLoopWorkerStuck = errors.New("supervisor: loop worker did not stop")

// LoopConfig configures a supervised loop.
type LoopConfig struct {
	Name        string                // in logs and metrics (narad_<Name>_restarts): "reaper", "cold_retention"
	Interval    time.Duration         // from the end of one pass to the start of the next
	StallAfter  time.Duration         // a pass without a tick (start, Beat, Item done) this long is replaced
	MaxRestarts int                   // replacements up to it log at warn, each past it at error: the alarm
	CloseWait   time.Duration         // how long Close waits for workers ignoring their context; default 10s
	Logger      *zap.Logger           // default zap.NewNop()
	Registerer  prometheus.Registerer // nil: register nothing
}

// Pass is one pass of the loop's work. It must return when ctx is done. A
// long pass calls p.Beat, or runs its work through p.Item, to show progress.
type Pass func(ctx context.Context, p *PassContext)

// PassContext is handed to each pass; it belongs to the worker running it.
type PassContext struct {
	loop   *Loop
	worker *loopWorker
}

// Beat records that the pass is making progress, restarting the stall clock.
func (p *PassContext) Beat() { p.worker.tick() }

// Item runs one item of the pass's work (one partition, say). A panic in fn is
// recovered: logged at error with the key and the stack, counted in
// narad_<name>_panics_total, and Item returns so the pass goes on with the
// next item. A finished item, panicked or not, counts as a Beat.
func (p *PassContext) Item(key string, fn func()) {
	defer p.worker.tick()
	defer func() {
		if r := recover(); r != nil {
			p.loop.recovered(r, zap.String("key", key))
		}
	}()
	fn()
}

// Loop runs a Pass every Interval in a worker goroutine, supervised by a
// watchdog goroutine that replaces a worker whose pass stops ticking.
//
// Invariants:
//   - Exactly one worker is current; only the watchdog replaces it, after
//     cancelling the old one, and never waits for the old one (it may be
//     stuck in a syscall).
//   - Every worker ever started is current or in abandoned (until seen
//     finished): the Loop owns them all and Close waits for each, for those
//     ignoring their context up to CloseWait.
//   - The stall clock runs only inside a pass: a worker waiting for its next
//     Interval is never stalled, however long the Interval.
type Loop struct {
	cfg     LoopConfig // immutable after StartLoop, like the fields up to ctx
	pass    Pass
	log     *zap.Logger
	metrics loopMetrics
	epoch   time.Time     // monotonic origin of worker ticks
	trigger chan struct{} // one-buffered, so pending triggers coalesce
	ctx     context.Context
	cancel  context.CancelFunc // cancels ctx, the parent of every worker's

	// Owned by StartLoop until it starts the watchdog, then by the watchdog,
	// then by Close once watchdogDone is closed: no lock needed.
	current      *loopWorker
	abandoned    []*loopWorker
	restarts     int
	watchdogDone chan struct{}

	closeOnce sync.Once
	closeErr  error // set once by Close
}

// loopWorker is one goroutine running passes.
type loopWorker struct {
	name   string // "<loop> worker <n>", for logs and Close's error
	epoch  time.Time
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine returns
	// lastTick is the time since epoch of the running pass's last tick, or
	// loopIdle between passes. Written by the worker, read by the watchdog.
	lastTick atomic.Int64
}

const loopIdle = -1

func (w *loopWorker) tick() { w.lastTick.Store(int64(time.Since(w.epoch))) }

func (w *loopWorker) finished() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// sinceTick says how long the running pass has gone without a tick; busy is
// false between passes.
func (w *loopWorker) sinceTick() (since time.Duration, busy bool) {
	last := w.lastTick.Load()
	if last == loopIdle {
		return 0, false
	}
	return time.Since(w.epoch) - time.Duration(last), true
}

// StartLoop starts the loop. The first pass runs one Interval after the start
// (call Trigger to run one now); a replacement worker also waits an Interval.
// It panics, like time.NewTicker, on an empty Name, a non-positive Interval or
// StallAfter, or metrics that cannot be registered; metrics already
// registered under the same names are shared.
func StartLoop(cfg LoopConfig, pass Pass) *Loop {
	if cfg.Name == "" || cfg.Interval <= 0 || cfg.StallAfter <= 0 {
		panic(fmt.Sprintf("supervisor: invalid LoopConfig %+v", cfg))
	}
	if cfg.CloseWait <= 0 {
		cfg.CloseWait = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	l := &Loop{
		cfg:          cfg,
		pass:         pass,
		log:          cfg.Logger.With(zap.String("loop", cfg.Name)),
		metrics:      newLoopMetrics(cfg.Name, cfg.Registerer),
		epoch:        time.Now(),
		trigger:      make(chan struct{}, 1),
		watchdogDone: make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.current = l.startWorker()
	go l.watch()
	return l
}

// Trigger asks for a pass now. It never blocks; triggers that arrive while
// one is pending coalesce into one pass. After the pass, the next one is due
// an Interval later.
func (l *Loop) Trigger() {
	select {
	case l.trigger <- struct{}{}:
	default:
	}
}

// Close cancels the watchdog and every worker, and waits for them. A worker
// that ignores its cancelled context is waited for up to CloseWait in all,
// then left behind: Close returns ErrLoopWorkerStuck naming it. Close is
// idempotent and returns the same result every time.
func (l *Loop) Close() error {
	l.closeOnce.Do(func() {
		l.cancel()
		<-l.watchdogDone
		deadline, stop := context.WithTimeout(context.Background(), l.cfg.CloseWait)
		defer stop()
		var stuck []string
		for _, w := range append(l.abandoned, l.current) {
			select {
			case <-w.done:
			case <-deadline.Done():
			}
			if !w.finished() {
				stuck = append(stuck, w.name)
			}
		}
		if len(stuck) > 0 {
			l.closeErr = fmt.Errorf("%w: %s still running %v after Close",
				ErrLoopWorkerStuck, strings.Join(stuck, ", "), l.cfg.CloseWait)
		}
	})
	return l.closeErr
}

func (l *Loop) startWorker() *loopWorker {
	w := &loopWorker{
		name:  fmt.Sprintf("%s worker %d", l.cfg.Name, l.restarts+1),
		epoch: l.epoch,
		done:  make(chan struct{}),
	}
	w.lastTick.Store(loopIdle)
	ctx, cancel := context.WithCancel(l.ctx)
	w.cancel = cancel
	go pprof.Do(ctx, pprof.Labels("loop", l.cfg.Name), func(ctx context.Context) {
		defer close(w.done)
		l.work(ctx, w)
	})
	return w
}

// work is a worker's goroutine: a pass after every Interval or Trigger until
// its context is cancelled.
func (l *Loop) work(ctx context.Context, w *loopWorker) {
	timer := time.NewTimer(l.cfg.Interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.trigger:
			if ctx.Err() != nil {
				l.Trigger() // not ours to run: leave it for the current worker
				return
			}
		}
		l.runPass(ctx, w)
		timer.Reset(l.cfg.Interval)
	}
}

// runPass runs one pass, containing a panic that escapes it.
func (l *Loop) runPass(ctx context.Context, w *loopWorker) {
	start := time.Now()
	w.tick()
	defer func() {
		w.lastTick.Store(loopIdle)
		l.metrics.passes.Inc()
		l.metrics.passSeconds.Observe(time.Since(start).Seconds())
		if r := recover(); r != nil {
			l.recovered(r, zap.String("worker", w.name))
		}
	}()
	l.pass(ctx, &PassContext{loop: l, worker: w})
}

// recovered logs and counts a panic; it is called from the deferred function
// that recovered it, so the stack still shows where it panicked.
func (l *Loop) recovered(r any, where zap.Field) {
	l.metrics.panics.Inc()
	l.log.Error("supervised loop recovered a panic",
		where, zap.Any("panic", r), zap.Stack("stack"))
}

// watch is the watchdog goroutine. It wakes exactly when the current pass
// would reach StallAfter without a tick, and replaces its worker if it has.
func (l *Loop) watch() {
	defer close(l.watchdogDone)
	timer := time.NewTimer(l.cfg.StallAfter)
	defer timer.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-timer.C:
		}
		next := l.cfg.StallAfter
		if since, busy := l.current.sinceTick(); busy {
			if since >= l.cfg.StallAfter {
				l.replace(since)
			} else {
				next = l.cfg.StallAfter - since
			}
		}
		timer.Reset(next)
	}
}

// replace abandons the current worker, which has not ticked for stalledFor,
// and starts a new one without waiting for the old one.
func (l *Loop) replace(stalledFor time.Duration) {
	old := l.current
	old.cancel()
	l.abandoned = append(slices.DeleteFunc(l.abandoned, (*loopWorker).finished), old)
	l.restarts++
	l.current = l.startWorker()
	l.metrics.restarts.Inc()

	level := zap.WarnLevel
	if l.restarts > l.cfg.MaxRestarts {
		level = zap.ErrorLevel // past the cap: this line is the alarm
	}
	l.log.Log(level, "supervised loop stalled; worker replaced",
		zap.String("stalled_worker", old.name), zap.String("worker", l.current.name),
		zap.Duration("stalled_for", stalledFor), zap.Int("restarts", l.restarts),
		zap.Int("max_restarts", l.cfg.MaxRestarts), zap.Int("abandoned_running", len(l.abandoned)))
}

// loopMetrics are one loop's metrics, named narad_<name>_....
type loopMetrics struct {
	restarts    prometheus.Counter
	panics      prometheus.Counter
	passes      prometheus.Counter
	passSeconds prometheus.Histogram
}

func newLoopMetrics(name string, reg prometheus.Registerer) loopMetrics {
	prefix := "narad_" + name + "_"
	counter := func(suffix, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + suffix, Help: help})
		return promshare.Register(reg, c)
	}
	return loopMetrics{
		restarts: counter("restarts", "Stalled workers of the "+name+" loop replaced."),
		panics:   counter("panics_total", "Panics recovered in the "+name+" loop."),
		passes:   counter("passes_total", "Passes of the "+name+" loop finished."),
		passSeconds: promshare.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    prefix + "pass_duration_seconds",
			Help:    "Duration of passes of the " + name + " loop.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1ms to about 4.4 minutes
		})),
	}
}
