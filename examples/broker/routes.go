package main

import (
	"encoding/json"
	"net/http"
)

// partitionStatus is one partition the node owns, as GET
// /broker/partitions lists it.
type partitionStatus struct {
	Topic         string `json:"topic"`
	Partition     int    `json:"partition"`
	HighWatermark int64  `json:"high_watermark"`
}

// routes adds the broker's own routes to mux, beside the node's API.
func (b *broker) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /broker/partitions", b.listPartitions)
}

// listPartitions answers the partitions this node owns, each with its
// high watermark, asked of the node itself (server.Server's Node), not
// of its API: 503 until the node is ready.
func (b *broker) listPartitions(w http.ResponseWriter, r *http.Request) {
	if !b.node.Ready() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	node := b.node.Node()
	refs, err := node.Partitions(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out := make([]partitionStatus, 0, len(refs))
	for _, ref := range refs {
		hwm, err := node.HighWatermark(r.Context(), ref.Topic, ref.Partition)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out = append(out, partitionStatus{Topic: ref.Topic, Partition: ref.Partition, HighWatermark: hwm})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"partitions": out})
}
