package runtime

import (
	"context"
	"strconv"
	"sync"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// topicMetrics are the node's per-topic counters: records, and the key and
// value bytes of records, committed by Produce and served by Read. A
// topic's series exist from its creation (or the node's start) at zero,
// and go when it is deleted.
type topicMetrics struct {
	produced, producedBytes, fetched, fetchedBytes *prometheus.CounterVec
}

func newTopicMetrics(reg prometheus.Registerer) topicMetrics {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"topic"})
	}
	m := topicMetrics{
		produced:      vec("narad_topic_produced_records_total", "Records committed by produce, by topic."),
		producedBytes: vec("narad_topic_produced_bytes_total", "Key and value bytes of the records committed by produce, by topic."),
		fetched:       vec("narad_topic_fetched_records_total", "Records served by reads, by topic."),
		fetchedBytes:  vec("narad_topic_fetched_bytes_total", "Key and value bytes of the records served by reads, by topic."),
	}
	if reg != nil {
		reg.MustRegister(m.produced, m.producedBytes, m.fetched, m.fetchedBytes)
	}
	return m
}

func (m topicMetrics) all() []*prometheus.CounterVec {
	return []*prometheus.CounterVec{m.produced, m.producedBytes, m.fetched, m.fetchedBytes}
}

// add makes the topic's series, at zero.
func (m topicMetrics) add(topic string) {
	for _, v := range m.all() {
		v.WithLabelValues(topic)
	}
}

// remove drops the topic's series.
func (m topicMetrics) remove(topic string) {
	for _, v := range m.all() {
		v.DeleteLabelValues(topic)
	}
}

func (m topicMetrics) countProduce(topic string, records []partition.Record) {
	m.produced.WithLabelValues(topic).Add(float64(len(records)))
	m.producedBytes.WithLabelValues(topic).Add(float64(recordBytes(records)))
}

func (m topicMetrics) countFetch(topic string, res partition.ReadResult) {
	if len(res.Records) == 0 {
		return
	}
	bytes := 0
	for _, r := range res.Records {
		bytes += len(r.Key) + len(r.Value)
	}
	m.fetched.WithLabelValues(topic).Add(float64(len(res.Records)))
	m.fetchedBytes.WithLabelValues(topic).Add(float64(bytes))
}

func recordBytes(records []partition.Record) int {
	n := 0
	for _, r := range records {
		n += len(r.Key) + len(r.Value)
	}
	return n
}

// partitionMarks knows every partition's high watermark for the
// per-partition gauge without opening a closed log: an open log answers
// itself; a closed one is remembered from its close. Each is kept with the
// incarnation its log was opened under, so a topic deleted and recreated
// (here or by another node) never shows the old incarnation's boundary.
//
// Invariants: mu guards both maps and is a leaf (nothing else is taken
// while it is held); a key is in opened from an open under its topic's
// guard until the close, then in closed until the next open, an install
// or the topic's purge forgets it.
type partitionMarks struct {
	mu     sync.Mutex
	opened map[supervisor.Key]wire.IncarnationID
	closed map[supervisor.Key]closedMark
}

type closedMark struct {
	incarnation wire.IncarnationID
	hwm         int64
}

func newPartitionMarks() *partitionMarks {
	return &partitionMarks{opened: map[supervisor.Key]wire.IncarnationID{}, closed: map[supervisor.Key]closedMark{}}
}

func (m *partitionMarks) open(key supervisor.Key, id wire.IncarnationID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opened[key] = id
	delete(m.closed, key)
}

func (m *partitionMarks) close(key supervisor.Key, hwm int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.opened[key]; ok {
		m.closed[key] = closedMark{incarnation: id, hwm: hwm}
		delete(m.opened, key)
	}
}

// forget drops what is known of key (its directory was replaced).
func (m *partitionMarks) forget(key supervisor.Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.closed, key)
}

// forgetTopic drops what is known of a purged topic's closed partitions.
func (m *partitionMarks) forgetTopic(topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range m.closed {
		if key.Topic == topic {
			delete(m.closed, key)
		}
	}
}

func (m *partitionMarks) openedAs(key supervisor.Key) (wire.IncarnationID, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.opened[key]
	return id, ok
}

func (m *partitionMarks) closedAs(key supervisor.Key) (closedMark, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.closed[key]
	return c, ok
}

// hwmCollector is narad_partition_high_watermark{topic,partition},
// computed at each scrape from the open logs and the marks of closed
// ones: a scrape never opens a log. A partition not opened since the node
// started (startup opens them all; one that failed to) has no series.
type hwmCollector struct{ n *Node }

var hwmDesc = prometheus.NewDesc("narad_partition_high_watermark",
	"A partition's high watermark: the offset its next record gets.", []string{"topic", "partition"}, nil)

func (c hwmCollector) Describe(ch chan<- *prometheus.Desc) { ch <- hwmDesc }

func (c hwmCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	topics, err := n.ms.Topics(context.Background())
	if err != nil {
		return
	}
	for _, rec := range topics {
		for p := range rec.Partitions {
			key := supervisor.Key{Topic: rec.Name, Partition: p}
			hwm, ok := int64(0), false
			if l, open := n.reg.Lookup(key); open && !l.Closed() {
				id, known := n.marks.openedAs(key)
				hwm, ok = l.HighWatermark(), known && id == rec.Incarnation
			} else if m, known := n.marks.closedAs(key); known && m.incarnation == rec.Incarnation {
				hwm, ok = m.hwm, true
			}
			if ok {
				ch <- prometheus.MustNewConstMetric(hwmDesc, prometheus.GaugeValue, float64(hwm), rec.Name, strconv.Itoa(p))
			}
		}
	}
}
