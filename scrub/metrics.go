package scrub

import (
	"strconv"
	"sync"
	"time"

	"github.com/narad-io/storage/internal/promshare"
	"github.com/prometheus/client_golang/prometheus"
)

// partitionKey names one partition of one topic.
type partitionKey struct {
	topic     string
	partition int
}

// partitionStat is where one partition's scrub stands.
type partitionStat struct {
	progress  float64   // share of its sealed bytes the pass under way has checked
	completed time.Time // when its last whole pass ended; zero: never
}

// metrics are the scrubber's series (docs/metrics.md, "Scrubber"). The
// per-partition gauges are per topic instead on a node with metrics by
// topic (the least progress and the oldest completion among the topic's
// partitions), so a scrape grows with topics, not partitions.
//
// Invariants: mu guards stats and seen; a replaced worker may still be
// ending its pass while the new one runs. stats holds the partitions met
// since the last whole pass and during it, of topics whose directory the
// latest pass's start listed; seen, those met since the latest pass
// started. A whole pass forgets the others, and their series with them.
type metrics struct {
	byTopic bool

	bytes    prometheus.Counter
	damaged  prometheus.Counter
	failures prometheus.Counter
	oldest   prometheus.Gauge
	progress *prometheus.GaugeVec // {topic,partition}, or {topic} by topic
	done     *prometheus.GaugeVec // likewise

	mu    sync.Mutex
	stats map[partitionKey]partitionStat
	seen  map[partitionKey]bool // met in the pass under way
}

func newMetrics(reg prometheus.Registerer, byTopic bool) *metrics {
	labels, scope := []string{"topic", "partition"}, "partition"
	if byTopic {
		labels, scope = []string{"topic"}, "topic"
	}
	m := &metrics{
		byTopic: byTopic,
		bytes: promshare.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_scrub_bytes_total", Help: "Bytes of sealed segments the scrubber read and checked.",
		})),
		damaged: promshare.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_scrub_damaged_frames_total", Help: "Damaged or misplaced frames the scrubber found in sealed segments.",
		})),
		failures: promshare.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_scrub_read_errors_total", Help: "Sealed segments the scrubber could not read for an I/O error (not damage).",
		})),
		oldest: promshare.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "narad_scrub_oldest_pass_completed_timestamp_seconds",
			Help: "The oldest last whole scrub among the node's partitions, Unix seconds; 0 while one has never completed one. Set at the end of each pass.",
		})),
		progress: promshare.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "narad_scrub_" + scope + "_progress_ratio",
			Help: "Share of the sealed bytes the scrubber's pass under way has checked (by topic: the least among its partitions).",
		}, labels)),
		done: promshare.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "narad_scrub_" + scope + "_last_pass_completed_timestamp_seconds",
			Help: "When the scrubber last checked every sealed segment, Unix seconds; 0: never (by topic: the oldest among its partitions).",
		}, labels)),
		stats: map[partitionKey]partitionStat{},
		seen:  map[partitionKey]bool{},
	}
	return m
}

// set records where k's scrub stands and, per partition, exports it.
func (m *metrics) set(k partitionKey, st partitionStat) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats[k], m.seen[k] = st, true
	if !m.byTopic {
		p := strconv.Itoa(k.partition)
		m.progress.WithLabelValues(k.topic, p).Set(st.progress)
		m.done.WithLabelValues(k.topic, p).Set(unixSeconds(st.completed))
	}
}

// passStart begins a pass: seen is cleared (a pass stopped part way met
// partitions that a whole pass after it must meet again to keep), and
// the partitions of topics not listed (deleted since) are forgotten with
// their series.
func (m *metrics) passStart(listed func(topic string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.seen)
	for k := range m.stats {
		if !listed(k.topic) {
			m.forget(k)
		}
	}
}

// keep marks k met in the pass under way without changing its series: a
// partition the pass could not decide on (its assignment unknown).
func (m *metrics) keep(k partitionKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.stats[k]; ok {
		m.seen[k] = true
	}
}

// forget drops k and its series (by topic, the topic's once it holds no
// other partition). mu is held.
func (m *metrics) forget(k partitionKey) {
	delete(m.stats, k)
	if !m.byTopic {
		p := strconv.Itoa(k.partition)
		m.progress.DeleteLabelValues(k.topic, p)
		m.done.DeleteLabelValues(k.topic, p)
		return
	}
	for o := range m.stats {
		if o.topic == k.topic {
			return
		}
	}
	m.progress.DeleteLabelValues(k.topic)
	m.done.DeleteLabelValues(k.topic)
}

// topicDone exports a topic's gauges by topic, once the pass has visited
// its partitions: the least progress and the oldest completion.
func (m *metrics) topicDone(topic string) {
	if !m.byTopic {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	least, oldest, any := 1.0, time.Time{}, false
	for k, st := range m.stats {
		if k.topic != topic {
			continue
		}
		if !any || st.completed.Before(oldest) {
			oldest = st.completed
		}
		least, any = min(least, st.progress), true
	}
	if any {
		m.progress.WithLabelValues(topic).Set(least)
		m.done.WithLabelValues(topic).Set(unixSeconds(oldest))
	}
}

// passDone ends a whole pass: partitions it did not meet (deleted, moved
// away) are forgotten with their series, and the node-wide oldest
// completion is set.
func (m *metrics) passDone() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.stats {
		if !m.seen[k] {
			m.forget(k)
		}
	}
	var oldest time.Time
	first := true
	for _, st := range m.stats {
		if first || st.completed.Before(oldest) {
			oldest, first = st.completed, false
		}
	}
	m.oldest.Set(unixSeconds(oldest))
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMilli()) / 1000
}
