package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// HTTPResult is one http suite workload's figures.
type HTTPResult struct {
	Workload    string  `json:"workload"` // "produce, closed loop", "produce, open loop at 50%" and "at 80%", "produce to fetch", and the topic workloads (topicWorkloads)
	Producers   int     `json:"producers"`
	Partitions  int     `json:"partitions"`
	Batch       int     `json:"batch"`
	RecordBytes int     `json:"record_bytes"`
	TargetRate  float64 `json:"target_batches_per_s,omitempty"` // open loop: the schedule
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	// Latency in milliseconds. Open loop: from each batch's scheduled send
	// time, so a stall counts against every batch it delayed (corrected
	// for coordinated omission). Produce to fetch: from the send to the
	// record reaching a long-polling fetch.
	// The topic workloads have no latency figures (zero).
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	// Open loop: its p99 over the closed loop's in the same run, and the
	// most batches one producer had in flight at once.
	P99VsClosed float64 `json:"p99_vs_closed,omitempty"`
	MaxInFlight int     `json:"max_in_flight,omitempty"`
	// SendLateP99Ms: open loop, the p99 of how late a send began after
	// its scheduled time (the generator's own delay).
	SendLateP99Ms float64 `json:"send_late_p99_ms,omitempty"`
	// Server is the daemon's p99s over the produce workloads (ServerP99).
	Server *ServerP99 `json:"server,omitempty"`
	// VsEngine is a topic workload's records/s over runtime.Node.Produce's
	// in the same run, the same records in the same batches.
	VsEngine float64 `json:"vs_engine,omitempty"`
}

// HTTPLoad is an http suite workload's shape. With TopicRecords, the
// topic workloads run too: that many records through a client.Producer,
// a client.Consumer and a client.QueueConsumer, beside
// runtime.Node.Produce committing them in EngineDir (on the daemon's
// disk, for a fair ratio).
type HTTPLoad struct {
	Producers, Partitions, Batch, RecordBytes int
	Duration                                  time.Duration
	TopicRecords                              int
	EngineDir                                 string
}

// Daemon is a narad-storaged the harness started, or one already running.
type Daemon struct {
	Addr string
	cmd  *exec.Cmd
	done chan error
}

// StartDaemon starts the narad-storaged binary at bin on a free loopback
// port with its data in dataDir (and serve's flags, if any), and returns once it reports ready. The
// daemon gets SIGTERM if the harness dies; a daemon that exits before it
// is ready is reported with the last lines it logged.
func StartDaemon(bin, dataDir string, flags ...string) (*Daemon, error) {
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir}, flags...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &Daemon{cmd: cmd, done: make(chan error, 1)}
	ready := make(chan string, 1)
	var lastMu sync.Mutex
	var last []string // the last lines logged, for an error
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		addr := ""
		for sc.Scan() {
			lastMu.Lock()
			last = append(last, sc.Text())
			if len(last) > 20 {
				last = last[1:]
			}
			lastMu.Unlock()
			var entry struct{ Msg, Addr, Scheme string }
			if json.Unmarshal(sc.Bytes(), &entry) != nil {
				continue
			}
			switch entry.Msg {
			case "listening":
				addr = entry.Scheme + "://" + entry.Addr
			case "ready":
				ready <- addr
			}
		}
		io.Copy(io.Discard, stderr) // a line past the scanner's bound: keep draining
		close(ready)
		d.done <- cmd.Wait() // after the pipe is read to its end, as os/exec asks
	}()
	select {
	case addr, ok := <-ready:
		if !ok {
			err := <-d.done
			lastMu.Lock()
			defer lastMu.Unlock()
			return nil, fmt.Errorf("narad-storaged exited before it was ready (%v); its last lines:\n%s", err, strings.Join(last, "\n"))
		}
		d.Addr = addr
		return d, nil
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		return nil, errors.New("narad-storaged not ready in 2 minutes")
	}
}

// Stop ends a daemon the harness started (SIGTERM: a clean shutdown).
func (d *Daemon) Stop() error {
	if d.cmd == nil {
		return nil
	}
	d.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-d.done:
		return err
	case <-time.After(time.Minute):
		d.cmd.Process.Kill()
		return errors.New("narad-storaged did not stop in a minute")
	}
}

// BuildDaemon builds narad-storaged into dir from the repository this
// module replaces the engine with, in that repository's own module (its
// go.mod holds the daemon's dependencies, the cluster's etcd client among
// them, which this module does not need); the working directory must be
// in the bench module.
func BuildDaemon(dir string) (string, error) {
	bin := filepath.Join(dir, "narad-storaged")
	var stderr strings.Builder
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/narad-io/storage")
	list.Stderr = &stderr
	root, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("find the repository (run narad-bench from the bench directory, or pass --daemon or --http-addr): %v\n%s", err, stderr.String())
	}
	build := exec.Command("go", "build", "-o", bin, "./cmd/narad-storaged")
	build.Dir = strings.TrimSpace(string(root))
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build narad-storaged: %v\n%s", err, out)
	}
	return bin, nil
}

// RunHTTP runs the http suite's workloads for load against the daemon at
// addr on a topic of its own: a closed loop (as fast as each producer
// goes), an open loop at 80% of that rate, and produce to fetch with a
// long-polling reader a partition; with load.TopicRecords, the topic
// workloads (topicWorkloads). What every reader received is checked
// against what was produced.
func RunHTTP(addr, topic string, load HTTPLoad) ([]HTTPResult, error) {
	c, err := client.New(addr, client.Options{})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if _, _, err := c.CreateTopic(ctx, topic, load.Partitions, client.Retention{}); err != nil {
		return nil, err
	}
	base := HTTPResult{Producers: load.Producers, Partitions: load.Partitions, Batch: load.Batch, RecordBytes: load.RecordBytes}
	pool := batchPool(Cell{RecordBytes: load.RecordBytes, Batch: load.Batch})
	batches := make([][]client.Record, len(pool))
	for i, b := range pool {
		batches[i] = make([]client.Record, len(b))
		for j, v := range b {
			batches[i][j] = client.Record{Value: v}
		}
	}

	// The produce workloads' client keeps a connection idle for every
	// send an open loop may have in flight, so a burst after a stall does
	// not dial new ones (their cost would land in the client's tail).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = load.Producers * openInFlight
	lc, err := client.New(addr, client.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	produced := make([]atomic.Int64, load.Partitions) // records sent to each partition
	var closedRate, closedP99, rate float64
	var out []HTTPResult
	for _, share := range []float64{0, 0.5, 0.8} { // the closed loop, then open loops at shares of its rate
		before, err := scrapeHistograms(addr, false)
		if err != nil {
			return nil, err
		}
		rate = share * closedRate / float64(load.Batch)
		ph, err := produceLoad(ctx, lc, topic, load, batches, rate, produced)
		if err != nil {
			return nil, err
		}
		after, err := scrapeHistograms(addr, true)
		if err != nil {
			return nil, err
		}
		r := base
		r.Workload = "produce, closed loop"
		if share > 0 {
			r.Workload, r.TargetRate = fmt.Sprintf("produce, open loop at %.0f%%", 100*share), rate
		}
		fill(&r, ph.recordsPerS, ph.latency, load)
		server := after.p99Since(before)
		r.Server = &server
		if share == 0 {
			closedRate, closedP99 = ph.recordsPerS, r.P99Ms
		} else {
			r.MaxInFlight = ph.maxInFlight
			r.SendLateP99Ms = float64(ph.late.ValueAtQuantile(99)) / 1000
			if closedP99 > 0 {
				r.P99VsClosed = r.P99Ms / closedP99
			}
		}
		out = append(out, r)
	}
	// Every record acknowledged is there: each partition's high watermark
	// is what was sent to it.
	for p := range load.Partitions {
		f, err := c.Fetch(ctx, topic, p, 0, client.FetchOptions{MaxRecords: 1})
		if err != nil {
			return nil, err
		}
		if f.HighWatermark != produced[p].Load() {
			return nil, fmt.Errorf("partition %d: high watermark %d after %d records were acknowledged", p, f.HighWatermark, produced[p].Load())
		}
	}

	e2e, err := produceToFetch(ctx, c, topic, load, rate/2)
	if err != nil {
		return nil, err
	}
	out = append(out, e2e)
	if load.TopicRecords > 0 {
		topics, err := topicWorkloads(ctx, c, topic+"-topic", load)
		if err != nil {
			return nil, err
		}
		out = append(out, topics...)
	}
	return out, nil
}

func fill(r *HTTPResult, recordsPerS float64, h *hdrhistogram.Histogram, load HTTPLoad) {
	r.RecordsPerS = recordsPerS
	r.MBPerS = recordsPerS * float64(load.RecordBytes) / 1e6
	ms := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	r.P50Ms, r.P99Ms, r.P999Ms, r.MaxMs = ms(50), ms(99), ms(99.9), float64(h.Max())/1000
}

// produceLoad runs the producers for load.Duration. rate 0 is a closed
// loop: each producer sends its next batch when the last is answered,
// latency from each send. Otherwise it is an open loop: the producers
// share a schedule of rate batches a second, and each batch is sent at
// its time whether or not the producer's earlier ones were answered (a
// goroutine a send, up to openInFlight a producer), latency from its
// scheduled time, so a stall counts against every batch it delayed. It
// returns what it measured (producePhase).
//
// An open loop that waited for each answer before the next send (as
// this one did before) is a closed loop with a timetable: at 80 % of the
// closed loop's rate each producer is a queue of one server at 80 %
// utilization, and its tail is that queue's, not the node's (a batch
// behind one slow fsync waits for it, and the next behind that one);
// the node, given the batches at once, commits them together.
func produceLoad(ctx context.Context, c *client.Client, topic string, load HTTPLoad, batches [][]client.Record, rate float64, produced []atomic.Int64) (producePhase, error) {
	ph := producePhase{latency: hdrhistogram.New(1, histMaxMicros, 3), late: hdrhistogram.New(1, histMaxMicros, 3)}
	var mu sync.Mutex
	var records, maxInFlight atomic.Int64
	start := time.Now()
	end := start.Add(load.Duration)
	err := forEach(load.Producers, load.Producers, func(p int) error {
		latency, late := hdrhistogram.New(1, histMaxMicros, 3), hdrhistogram.New(1, histMaxMicros, 3)
		var localMu sync.Mutex
		defer func() {
			mu.Lock()
			ph.latency.Merge(latency)
			ph.late.Merge(late)
			mu.Unlock()
		}()
		send := func(k int, sent time.Time) error {
			batch := batches[(k*load.Producers+p)%len(batches)]
			if _, err := c.Produce(ctx, topic, p%load.Partitions, batch); err != nil {
				return err
			}
			localMu.Lock()
			_ = latency.RecordValue(min(max(time.Since(sent).Microseconds(), 1), histMaxMicros))
			localMu.Unlock()
			records.Add(int64(len(batch)))
			produced[p%load.Partitions].Add(int64(len(batch)))
			return nil
		}
		if rate <= 0 {
			for k := 0; time.Now().Before(end); k++ {
				if err := send(k, time.Now()); err != nil {
					return err
				}
			}
			return nil
		}
		interval := time.Duration(float64(time.Second) * float64(load.Producers) / rate)
		var sends errgroup.Group
		sends.SetLimit(openInFlight)
		var inFlight atomic.Int64
		for k := 0; ; k++ {
			// The schedule, staggered across producers.
			sent := start.Add(time.Duration(k)*interval + time.Duration(p)*interval/time.Duration(load.Producers))
			if sent.After(end) {
				break
			}
			if wait := time.Until(sent); wait > 0 {
				time.Sleep(wait)
			}
			sends.Go(func() error {
				localMu.Lock()
				_ = late.RecordValue(min(max(time.Since(sent).Microseconds(), 1), histMaxMicros))
				localMu.Unlock()
				now := inFlight.Add(1)
				defer inFlight.Add(-1)
				for seen := maxInFlight.Load(); now > seen && !maxInFlight.CompareAndSwap(seen, now); seen = maxInFlight.Load() {
				}
				return send(k, sent)
			})
		}
		return sends.Wait()
	})
	ph.recordsPerS = float64(records.Load()) / time.Since(start).Seconds()
	ph.maxInFlight = int(maxInFlight.Load())
	return ph, err
}

// producePhase is what produceLoad measured: records a second, each
// batch's latency, and, in an open loop, how late each send began after
// its scheduled time (the generator's own delay: a schedule slept past,
// or openInFlight reached) and the most sends one producer had in
// flight.
type producePhase struct {
	recordsPerS   float64
	latency, late *hdrhistogram.Histogram
	maxInFlight   int
}

// openInFlight bounds an open-loop producer's sends in flight: past it
// the schedule waits (and every batch it delays counts its wait), so a
// node that falls behind is measured, not buried under connections.
const openInFlight = 256

// produceToFetch has a reader long-poll each partition from its current
// end while the producers send batches of records stamped with their send
// time at rate batches a second; each record's latency is from its send
// to its fetch (one process does both: the stamps are its monotonic
// clock's). Every record sent must be fetched, once, in order.
func produceToFetch(ctx context.Context, c *client.Client, topic string, load HTTPLoad, rate float64) (HTTPResult, error) {
	r := HTTPResult{Workload: "produce to fetch", Producers: load.Producers, Partitions: load.Partitions,
		Batch: load.Batch, RecordBytes: load.RecordBytes, TargetRate: rate}
	starts := make([]int64, load.Partitions)
	for p := range starts {
		f, err := c.Fetch(ctx, topic, p, 0, client.FetchOptions{MaxRecords: 1})
		if err != nil {
			return r, err
		}
		starts[p] = f.HighWatermark
	}
	// Bodies built before the clock starts: a producer only stamps them.
	bodies := make([][]client.Record, load.Producers)
	for p := range bodies {
		bodies[p] = make([]client.Record, load.Batch)
		for j := range bodies[p] {
			v := Record(int64(p*load.Batch+j), max(load.RecordBytes, 9))
			bodies[p][j].Value = append(make([]byte, 8), v[8:]...)
		}
	}
	epoch := time.Now()
	hist := hdrhistogram.New(1, histMaxMicros, 3)
	var mu sync.Mutex
	var got atomic.Int64
	sent := make([]atomic.Int64, load.Partitions) // records acknowledged, a partition
	producing := make(chan struct{})
	readers := make(chan error, load.Partitions)
	for p := range load.Partitions {
		go func() {
			local := hdrhistogram.New(1, histMaxMicros, 3)
			finish := func(err error) {
				mu.Lock()
				hist.Merge(local)
				mu.Unlock()
				readers <- err
			}
			offset := starts[p]
			for {
				f, err := c.Fetch(ctx, topic, p, offset, client.FetchOptions{MaxRecords: 10000, MaxBytes: 8 << 20, Wait: time.Second})
				if err != nil {
					finish(err)
					return
				}
				now := time.Since(epoch)
				for _, rec := range f.Records {
					if rec.Offset != offset || len(rec.Value) < 8 {
						finish(fmt.Errorf("partition %d: offset %d where %d was expected, or a record the producers did not send", p, rec.Offset, offset))
						return
					}
					sentAt := time.Duration(binary.BigEndian.Uint64(rec.Value))
					_ = local.RecordValue(min(max((now-sentAt).Microseconds(), 1), histMaxMicros))
					got.Add(1)
					offset++
				}
				select {
				case <-producing:
					// The producers are done: stop at what they sent.
					if offset >= starts[p]+sent[p].Load() {
						finish(nil)
						return
					}
				default:
				}
			}
		}()
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) * float64(load.Producers) / max(rate, 1))
	err := forEach(load.Producers, load.Producers, func(p int) error {
		for k := 0; ; k++ {
			at := start.Add(time.Duration(k)*interval + time.Duration(p)*interval/time.Duration(load.Producers))
			if at.After(start.Add(load.Duration)) {
				return nil
			}
			if wait := time.Until(at); wait > 0 {
				time.Sleep(wait)
			}
			batch := bodies[p] // Produce returns before the next stamp
			stamp := uint64(time.Since(epoch))
			for i := range batch {
				binary.BigEndian.PutUint64(batch[i].Value, stamp)
			}
			if _, err := c.Produce(ctx, topic, p%load.Partitions, batch); err != nil {
				return err
			}
			sent[p%load.Partitions].Add(int64(len(batch)))
		}
	})
	elapsed := time.Since(start)
	close(producing)
	for range load.Partitions {
		if rerr := <-readers; rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return r, err
	}
	total := int64(0)
	for p := range sent {
		total += sent[p].Load()
	}
	if got.Load() != total {
		return r, fmt.Errorf("produce to fetch: %d records sent, %d fetched", total, got.Load())
	}
	fill(&r, float64(total)/elapsed.Seconds(), hist, load)
	return r, nil
}

// label is the workload's name, with its ratio to the engine's when it
// has one.
func (h HTTPResult) label() string {
	if h.VsEngine > 0 {
		return fmt.Sprintf("%s (%.2fx runtime.Node.Produce)", h.Workload, h.VsEngine)
	}
	if h.P99VsClosed > 0 {
		return fmt.Sprintf("%s (p99 %.1fx the closed loop's, up to %d in flight a producer)", h.Workload, h.P99VsClosed, h.MaxInFlight)
	}
	return h.Workload
}

// topicWorkloads measures the whole-topic clients beside the engine, in
// one run: runtime.Node.Produce committing load.TopicRecords records in
// the batches the Producer's defaults make (the batches dealt to the
// partitions in turn, a goroutine a partition, in load.EngineDir); then,
// against the daemon on
// a topic of its own, a client.Producer sending the same records one
// Produce each (keyless: sticky batches, its default options), a
// client.Consumer reading them all from the earliest, and a
// client.QueueConsumer leasing and acking them all (an Ack a Receive).
// Each is records/s from its first call to its last answer, and its
// ratio to the engine's. Every record is checked: the topic holds them
// all, and each reader got each once.
func topicWorkloads(ctx context.Context, c *client.Client, topic string, load HTTPLoad) ([]HTTPResult, error) {
	n, parts := load.TopicRecords, load.Partitions
	batch := min(10_000, max(1, (1<<20)/load.RecordBytes)) // what the Producer's defaults (10,000 records, 1 MiB) make
	values := make([][]byte, n)
	pool := batchPool(Cell{RecordBytes: load.RecordBytes, Batch: batch})
	for i := range values {
		b := pool[(i/batch)%len(pool)]
		values[i] = b[i%len(b)]
	}
	base := HTTPResult{Producers: 1, Partitions: parts, Batch: batch, RecordBytes: load.RecordBytes}
	result := func(workload string, perS, engine float64) HTTPResult {
		r := base
		r.Workload, r.RecordsPerS, r.MBPerS = workload, perS, perS*float64(load.RecordBytes)/1e6
		if engine > 0 {
			r.VsEngine = perS / engine
		}
		return r
	}

	engine, err := engineProduce(load.EngineDir, values, parts, batch)
	if err != nil {
		return nil, fmt.Errorf("runtime.Node.Produce: %w", err)
	}
	out := []HTTPResult{result("topic: runtime.Node.Produce", engine, 0)}
	out[0].Producers = parts

	if _, _, err := c.CreateTopic(ctx, topic, parts, client.Retention{}); err != nil {
		return nil, err
	}
	perS, err := timed(n, func() error { return producerLoad(ctx, c, topic, values) })
	if err != nil {
		return nil, fmt.Errorf("topic producer: %w", err)
	}
	out = append(out, result("topic: client.Producer", perS, engine))
	total := int64(0)
	for p := range parts {
		f, err := c.Fetch(ctx, topic, p, 0, client.FetchOptions{MaxRecords: 1})
		if err != nil {
			return nil, err
		}
		total += f.HighWatermark
	}
	if total != int64(n) {
		return nil, fmt.Errorf("topic producer: the topic holds %d records after %d were produced", total, n)
	}

	perS, err = timed(n, func() error { return consumerLoad(ctx, c, topic, n) })
	if err != nil {
		return nil, fmt.Errorf("topic consumer: %w", err)
	}
	out = append(out, result("topic: client.Consumer", perS, engine))
	perS, err = timed(n, func() error { return queueConsumerLoad(ctx, c, topic, parts, n) })
	if err != nil {
		return nil, fmt.Errorf("queue consumer: %w", err)
	}
	return append(out, result("topic: client.QueueConsumer", perS, engine)), nil
}

// timed runs fn, which moves records records, and returns records/s.
func timed(records int, fn func() error) (float64, error) {
	start := time.Now()
	err := fn()
	return float64(records) / time.Since(start).Seconds(), err
}

// engineProduce commits values through runtime.Node.Produce in dir, in
// batches of batch dealt to the partitions in turn, a goroutine a
// partition, and returns records/s.
func engineProduce(dir string, values [][]byte, partitions, batch int) (float64, error) {
	if dir == "" {
		return 0, errors.New("no EngineDir for the engine's side")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	n, err := runtime.New(runtime.Config{DataDir: dir, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer n.Close()
	if _, _, err := n.CreateTopic(bg, "topic", partitions, runtime.Retention{}); err != nil {
		return 0, err
	}
	batches := make([][][]partition.Record, partitions)
	for k := 0; k*batch < len(values); k++ {
		part := values[k*batch : min((k+1)*batch, len(values))]
		recs := make([]partition.Record, len(part))
		for i, v := range part {
			recs[i].Value = v
		}
		batches[k%partitions] = append(batches[k%partitions], recs)
	}
	return timed(len(values), func() error {
		return forEach(partitions, partitions, func(p int) error {
			for _, b := range batches[p] {
				if _, err := n.Produce(bg, "topic", p, b); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// producerLoad sends values through a client.Producer, one Produce
// each, and waits for every result.
func producerLoad(ctx context.Context, c *client.Client, topic string, values [][]byte) error {
	p, err := c.NewProducer(ctx, topic, client.ProducerOptions{})
	if err != nil {
		return err
	}
	var failed atomic.Int64
	var firstErr atomic.Value
	for _, v := range values {
		if err := p.Produce(ctx, client.Record{Value: v}, func(r client.Result) {
			if r.Err != nil && failed.Add(1) == 1 {
				firstErr.Store(r.Err)
			}
		}); err != nil {
			p.Close(ctx)
			return err
		}
	}
	if err := p.Close(ctx); err != nil {
		return err
	}
	if failed.Load() > 0 {
		return fmt.Errorf("%d records failed: %v", failed.Load(), firstErr.Load())
	}
	return nil
}

// consumerLoad reads the whole topic through a client.Consumer, from the
// earliest to io.EOF, and checks it read n records, each partition in
// order.
func consumerLoad(ctx context.Context, c *client.Client, topic string, n int) error {
	k, err := c.NewConsumer(ctx, topic, client.ConsumerOptions{MaxRecords: 10000, MaxBytes: 8 << 20})
	if err != nil {
		return err
	}
	defer k.Close()
	next := map[int]int64{}
	got := 0
	for {
		b, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		for _, r := range b.Records {
			if r.Offset != next[b.Partition] {
				return fmt.Errorf("partition %d: offset %d where %d was expected", b.Partition, r.Offset, next[b.Partition])
			}
			next[b.Partition]++
		}
		got += len(b.Records)
	}
	if got != n {
		return fmt.Errorf("read %d records of %d", got, n)
	}
	return nil
}

// queueConsumerLoad leases and acks every record of the topic through a
// client.QueueConsumer (an Ack a Receive) and checks each came once.
func queueConsumerLoad(ctx context.Context, c *client.Client, topic string, partitions, n int) error {
	q, err := c.NewQueueConsumer(ctx, topic, client.QueueConsumerOptions{MaxRecords: 1000, MaxInWork: 10000, Wait: time.Second})
	if err != nil {
		return err
	}
	seen := make([]map[int64]bool, partitions)
	for p := range seen {
		seen[p] = map[int64]bool{}
	}
	for acked := 0; acked < n; {
		msgs, err := q.Receive(ctx)
		if err != nil {
			q.Close(ctx)
			return err
		}
		for _, m := range msgs {
			if seen[m.Partition][m.Offset] {
				q.Close(ctx)
				return fmt.Errorf("record %d/%d delivered twice (a lease ran out?)", m.Partition, m.Offset)
			}
			seen[m.Partition][m.Offset] = true
		}
		if err := q.Ack(ctx, msgs...); err != nil {
			q.Close(ctx)
			return err
		}
		acked += len(msgs)
	}
	return q.Close(ctx)
}
