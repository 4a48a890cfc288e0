package runtime

import (
	"strconv"

	"github.com/narad-io/storage/internal/promshare"
	"github.com/prometheus/client_golang/prometheus"
)

// Lag you can see: at each scrape, from what the node holds in memory (a
// scrape never opens a log nor reads a file): each partition's queue
// consumer lag and leased records, and each fan-out cursor's lag, for the
// partitions whose consumer state or cursor is loaded and whose boundary
// the node knows.

var (
	consumerLagDesc = prometheus.NewDesc("narad_consumer_lag",
		"Records committed and not acked by the queue consumers: the high watermark, less the frontier and the acked-ahead set.", []string{"topic", "partition"}, nil)
	consumerLeasedDesc = prometheus.NewDesc("narad_consumer_leased",
		"Records leased to queue consumers and not settled.", []string{"topic", "partition"}, nil)
	cursorLagDesc = prometheus.NewDesc("narad_cursor_lag",
		"Records committed and not yet read through a fan-out cursor.", []string{"topic", "partition", "cursor"}, nil)

	// Their sums per topic, for nodes with MetricsByTopic.
	topicConsumerLagDesc = prometheus.NewDesc("narad_topic_consumer_lag",
		"narad_consumer_lag summed over the topic's partitions (nodes with metrics by topic).", []string{"topic"}, nil)
	topicConsumerLeasedDesc = prometheus.NewDesc("narad_topic_consumer_leased",
		"narad_consumer_leased summed over the topic's partitions (nodes with metrics by topic).", []string{"topic"}, nil)
	topicCursorLagDesc = prometheus.NewDesc("narad_topic_cursor_lag",
		"narad_cursor_lag summed over the topic's partitions, by cursor name (nodes with metrics by topic).", []string{"topic", "cursor"}, nil)
)

// lagCollector reports the lag of the nodes on one registerer.
type lagCollector struct{ nodeSet }

func registerLag(reg prometheus.Registerer, n *Node) (remove func()) {
	return promshare.Register(reg, &lagCollector{}).join(n)
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- consumerLagDesc
	ch <- consumerLeasedDesc
	ch <- cursorLagDesc
	ch <- topicConsumerLagDesc
	ch <- topicConsumerLeasedDesc
	ch <- topicCursorLagDesc
}

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	type series struct{ topic, partition, cursor string }
	seen := map[series]bool{} // a series once, whatever nodes share a topic name
	lagSums, leasedSums, cursorSums := topicSums{}, topicSums{}, topicSums{}
	for _, n := range c.sorted() {
		emit := func(d *prometheus.Desc, sums topicSums, v int64, s series, labels ...string) {
			if seen[s] {
				return
			}
			seen[s] = true
			if n.cfg.MetricsByTopic {
				cursor := s.cursor
				if d != cursorLagDesc {
					cursor = ""
				}
				sums.add(s.topic, cursor, v)
				return
			}
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
		}
		n.consumers.mu.Lock()
		consumers := make([]*consumer, 0, len(n.consumers.by))
		for _, cs := range n.consumers.by {
			consumers = append(consumers, cs)
		}
		n.consumers.mu.Unlock()
		for _, cs := range consumers {
			st, ok := cs.state()
			if !ok {
				continue
			}
			p := strconv.Itoa(cs.key.Partition)
			lag := max(cs.log.HighWatermark()-st.Frontier-int64(len(st.AckedAhead)), 0)
			emit(consumerLagDesc, lagSums, lag, series{cs.key.Topic, p, "\x00lag"}, cs.key.Topic, p)
			leased := 0
			if q := n.queues.lookup(cs.key); q != nil {
				q.mu.Lock()
				leased = len(q.leased)
				q.mu.Unlock()
			}
			emit(consumerLeasedDesc, leasedSums, int64(leased), series{cs.key.Topic, p, "\x00leased"}, cs.key.Topic, p)
		}
		n.cursors.mu.Lock()
		cursors := make([]*cursor, 0, len(n.cursors.by))
		for _, cur := range n.cursors.by {
			cursors = append(cursors, cur)
		}
		n.cursors.mu.Unlock()
		for _, cur := range cursors {
			hwm, known := n.marks.highWatermark(cur.key, cur.incarnation)
			if !known {
				continue
			}
			cur.mu.Lock()
			pos, dropped := cur.pos, cur.dropped
			cur.mu.Unlock()
			if dropped {
				continue
			}
			p := strconv.Itoa(cur.key.Partition)
			emit(cursorLagDesc, cursorSums, max(hwm-pos, 0), series{cur.key.Topic, p, cur.name}, cur.key.Topic, p, cur.name)
		}
	}
	lagSums.emit(ch, topicConsumerLagDesc)
	leasedSums.emit(ch, topicConsumerLeasedDesc)
	cursorSums.emit(ch, topicCursorLagDesc)
}
