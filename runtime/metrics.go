package runtime

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/narad-io/storage/internal/promshare"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// topicMetrics are the node's per-topic counters: records, and the key and
// value bytes of records, committed by Produce and served by Read. A
// topic's series exist from its creation (or the node's start, or its
// first open here) at zero, and go with its purge. Nodes on one
// registerer share the series (topicCounters): a topic's go when the last
// node holding it lets it go.
//
// Invariant: the node counts into a topic's series only while it is in
// mine; mu is held shared to count and exclusive to add or remove, so a
// count racing a purge never brings a deleted topic's series back. mu is
// taken before the shared counters' lock, and both are leaves.
type topicMetrics struct {
	shared *topicCounters
	mu     *sync.RWMutex
	mine   map[string]bool
}

// topicCounters are the per-topic series of a registerer, with how many
// nodes hold each topic.
type topicCounters struct {
	produced, producedBytes, fetched, fetchedBytes *prometheus.CounterVec

	mu      sync.Mutex
	holders map[string]int
}

func newTopicMetrics(reg prometheus.Registerer) topicMetrics {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"topic"})
	}
	shared := promshare.Register(reg, &topicCounters{
		produced:      vec("narad_topic_produced_records_total", "Records committed by produce, by topic."),
		producedBytes: vec("narad_topic_produced_bytes_total", "Key and value bytes of the records committed by produce, by topic."),
		fetched:       vec("narad_topic_fetched_records_total", "Records served by reads, by topic."),
		fetchedBytes:  vec("narad_topic_fetched_bytes_total", "Key and value bytes of the records served by reads, by topic."),
		holders:       map[string]int{},
	})
	return topicMetrics{shared: shared, mu: &sync.RWMutex{}, mine: map[string]bool{}}
}

func (c *topicCounters) all() []*prometheus.CounterVec {
	return []*prometheus.CounterVec{c.produced, c.producedBytes, c.fetched, c.fetchedBytes}
}

func (c *topicCounters) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.all() {
		v.Describe(ch)
	}
}

func (c *topicCounters) Collect(ch chan<- prometheus.Metric) {
	for _, v := range c.all() {
		v.Collect(ch)
	}
}

// add makes the topic's series, at zero, if this node does not hold it.
func (m topicMetrics) add(topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mine[topic] {
		return
	}
	m.mine[topic] = true
	c := m.shared
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holders[topic]++
	for _, v := range c.all() {
		v.WithLabelValues(topic)
	}
}

// remove lets the topic go; its series go with the last node holding it.
func (m topicMetrics) remove(topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mine[topic] {
		return
	}
	delete(m.mine, topic)
	c := m.shared
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holders[topic]--; c.holders[topic] > 0 {
		return
	}
	delete(c.holders, topic)
	for _, v := range c.all() {
		v.DeleteLabelValues(topic)
	}
}

// count adds to the topic's series, if this node holds it.
func (m topicMetrics) count(topic string, records, bytesVec *prometheus.CounterVec, n, bytes int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.mine[topic] {
		return
	}
	records.WithLabelValues(topic).Add(float64(n))
	bytesVec.WithLabelValues(topic).Add(float64(bytes))
}

func (m topicMetrics) countProduce(topic string, records []partition.Record) {
	m.count(topic, m.shared.produced, m.shared.producedBytes, len(records), recordBytes(records))
}

func (m topicMetrics) countFetch(topic string, res partition.ReadResult) {
	if len(res.Records) == 0 {
		return
	}
	bytes := 0
	for _, r := range res.Records {
		bytes += len(r.Key) + len(r.Value)
	}
	m.countFetched(topic, len(res.Records), bytes)
}

// countFetched counts n records of bytes served to a reader of topic.
func (m topicMetrics) countFetched(topic string, n, bytes int) {
	m.count(topic, m.shared.fetched, m.shared.fetchedBytes, n, bytes)
}

func recordBytes(records []partition.Record) int {
	n := 0
	for _, r := range records {
		n += len(r.Key) + len(r.Value)
	}
	return n
}

// partitionMarks knows every partition's high watermark for the
// per-partition gauge without opening a closed log: each log the registry
// opened is kept with the incarnation it was opened under, and answers
// its own boundary (a closed one its last); a close through the registry
// keeps just the boundary. So a topic deleted and recreated (here or by
// another node) never shows the old incarnation's boundary, and a scrape
// reads the incarnation and the boundary of one log together.
//
// Invariants: mu guards both maps and is a leaf (nothing else is taken
// while it is held); a key is in opened from its open under the topic's
// guard until its close, then in closed until the next open, an install
// or the topic's purge forgets it; a key Start left closed is in closed
// from then, with the boundary its directory holds (seed).
type partitionMarks struct {
	mu     sync.Mutex
	opened map[supervisor.Key]openMark
	closed map[supervisor.Key]closedMark
}

type openMark struct {
	incarnation wire.IncarnationID
	log         *partition.Log
}

type closedMark struct {
	incarnation wire.IncarnationID
	hwm         int64
}

func newPartitionMarks() *partitionMarks {
	return &partitionMarks{opened: map[supervisor.Key]openMark{}, closed: map[supervisor.Key]closedMark{}}
}

func (m *partitionMarks) open(key supervisor.Key, id wire.IncarnationID, l *partition.Log) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opened[key] = openMark{incarnation: id, log: l}
	delete(m.closed, key)
}

// close keeps the boundary l closed at, if l is the log opened for key.
func (m *partitionMarks) close(key supervisor.Key, l *partition.Log) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.opened[key]; ok && o.log == l {
		m.closed[key] = closedMark{incarnation: o.incarnation, hwm: l.HighWatermark()}
		delete(m.opened, key)
	}
}

// seed keeps hwm as key's boundary under incarnation id when nothing is
// known of key yet: a partition Start left closed, its exact boundary
// read from disk (or written by its recovery). The caller holds the
// topic's guard, so no open, close or forget of key runs meanwhile, and
// what is known already is as new as what the caller read.
func (m *partitionMarks) seed(key supervisor.Key, id wire.IncarnationID, hwm int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.opened[key]; ok {
		return
	}
	if _, ok := m.closed[key]; !ok {
		m.closed[key] = closedMark{incarnation: id, hwm: hwm}
	}
}

// forget drops what is known of key (its directory was replaced).
func (m *partitionMarks) forget(key supervisor.Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.opened, key)
	delete(m.closed, key)
}

// forgetTopic drops what is known of a purged topic's partitions.
func (m *partitionMarks) forgetTopic(topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range m.opened {
		if key.Topic == topic {
			delete(m.opened, key)
		}
	}
	for key := range m.closed {
		if key.Topic == topic {
			delete(m.closed, key)
		}
	}
}

// highWatermark is key's boundary under incarnation id, if known.
func (m *partitionMarks) highWatermark(key supervisor.Key, id wire.IncarnationID) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.opened[key]; ok {
		return o.log.HighWatermark(), o.incarnation == id
	}
	c, ok := m.closed[key]
	return c.hwm, ok && c.incarnation == id
}

// nodeSet is the nodes a collector shared on one registerer reports on,
// each adding itself at New and leaving at Close.
//
// Invariant: mu guards nodes and is a leaf.
type nodeSet struct {
	mu    sync.Mutex
	nodes map[*Node]bool
}

// join adds n and returns what removes it again.
func (s *nodeSet) join(n *Node) (leave func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodes == nil {
		s.nodes = map[*Node]bool{}
	}
	s.nodes[n] = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.nodes, n)
	}
}

// sorted lists the nodes by data directory: a stable order for a scrape.
func (s *nodeSet) sorted() []*Node {
	s.mu.Lock()
	nodes := make([]*Node, 0, len(s.nodes))
	for n := range s.nodes {
		nodes = append(nodes, n)
	}
	s.mu.Unlock()
	slices.SortFunc(nodes, func(a, b *Node) int { return strings.Compare(a.cfg.DataDir, b.cfg.DataDir) })
	return nodes
}

// hwmCollector is narad_partition_high_watermark{topic,partition}, or
// for nodes with MetricsByTopic narad_topic_appended_records{topic},
// computed at each scrape from the nodes' marks: a scrape never opens a
// log. Nodes on one registerer share one collector.
type hwmCollector struct{ nodeSet }

var (
	hwmDesc = prometheus.NewDesc("narad_partition_high_watermark",
		"A partition's high watermark: the offset its next record gets.", []string{"topic", "partition"}, nil)
	topicHWMDesc = prometheus.NewDesc("narad_topic_appended_records",
		"The sum of a topic's partitions' high watermarks: records its incarnation has appended (nodes with metrics by topic).", []string{"topic"}, nil)
)

// registerHWM adds n to reg's high watermark collector, registering one
// if reg has none, and returns what removes n again.
func registerHWM(reg prometheus.Registerer, n *Node) (remove func()) {
	return promshare.Register(reg, &hwmCollector{}).join(n)
}

func (c *hwmCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- hwmDesc
	ch <- topicHWMDesc
}

func (c *hwmCollector) Collect(ch chan<- prometheus.Metric) {
	// A partition once: two nodes holding a topic of one name would
	// otherwise make the scrape fail (or count it twice in a sum). Their
	// series need the registerer wrapped per node (a node label) to be
	// told apart.
	seen := map[supervisor.Key]bool{}
	sums := topicSums{}
	for _, n := range c.sorted() {
		topics, err := n.ms.Topics(context.Background())
		if err != nil {
			continue
		}
		for _, rec := range topics {
			for p := range rec.Partitions {
				key := supervisor.Key{Topic: rec.Name, Partition: p}
				hwm, ok := n.marks.highWatermark(key, rec.Incarnation)
				if !ok || seen[key] {
					continue
				}
				seen[key] = true
				if n.cfg.MetricsByTopic {
					sums.add(rec.Name, "", hwm)
				} else {
					ch <- prometheus.MustNewConstMetric(hwmDesc, prometheus.GaugeValue, float64(hwm), rec.Name, strconv.Itoa(p))
				}
			}
		}
	}
	sums.emit(ch, topicHWMDesc)
}

// topicSums adds up per-partition values by topic (and cursor name, for
// cursor lag), for nodes with MetricsByTopic.
type topicSums map[[2]string]int64

func (s topicSums) add(topic, cursor string, v int64) { s[[2]string{topic, cursor}] += v }

// emit sends each sum as a gauge of d, whose labels are topic, then
// cursor when d has two.
func (s topicSums) emit(ch chan<- prometheus.Metric, d *prometheus.Desc) {
	for k, v := range s {
		labels := []string{k[0]}
		if k[1] != "" {
			labels = append(labels, k[1])
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
}
