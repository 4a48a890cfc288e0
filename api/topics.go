package api

// TopicRequest is the body of a topic's PUT (create: Partitions
// required) and PATCH (a retention bound not given keeps its value;
// Partitions cannot change). A retention bound of 0 is no bound.
type TopicRequest struct {
	Partitions     *int   `json:"partitions,omitempty"`
	RetentionMs    *int64 `json:"retention_ms,omitempty"`
	RetentionBytes *int64 `json:"retention_bytes,omitempty"`
	// DictionaryAfter: each node trains the topic a zstd dictionary by
	// itself once this many records were produced there and it holds
	// none; 0 is never (the default).
	DictionaryAfter *int64 `json:"dictionary_after,omitempty"`
}

// TopicDescription describes a topic and its partitions: the answer of a
// topic's PUT, GET and PATCH.
type TopicDescription struct {
	Name string `json:"name"`
	// Incarnation names this topic apart from any other of the same name
	// before or after it (16 hex digits).
	Incarnation    string `json:"incarnation"`
	RetentionMs    int64  `json:"retention_ms"`
	RetentionBytes int64  `json:"retention_bytes"`
	// DictionaryAfter is the topic's automatic dictionary option (0: off).
	DictionaryAfter int64                  `json:"dictionary_after,omitempty"`
	Partitions      []PartitionDescription `json:"partitions"`
}

// PartitionDescription describes one partition of a topic.
type PartitionDescription struct {
	Partition     int   `json:"partition"`
	StartOffset   int64 `json:"start_offset"`
	HighWatermark int64 `json:"high_watermark"`
	Segments      int   `json:"segments"`
	Bytes         int64 `json:"bytes"`
	// Owner is the node that serves the partition, from a node of a
	// cluster; nil from a node alone, or while the partition has none.
	Owner *Owner `json:"owner,omitempty"`
	// Remote: another node than the one asked serves the partition, and
	// the figures above are zero; ask the owner.
	Remote bool `json:"remote,omitempty"`
}

// TopicList is the answer of GET /v1/topics.
type TopicList struct {
	Topics []TopicDescription `json:"topics"`
}

// DictionaryRequest is the body of a topic's dictionary POST: train a zstd
// dictionary on the topic's newest records on this node. A field not given
// takes its default.
type DictionaryRequest struct {
	// Samples is how many of the newest records to train on, spread over
	// the partitions the node owns: 8 to 100,000, default 2,000.
	Samples *int `json:"samples,omitempty"`
	// MaxBytes bounds the dictionary: 1,024 to 1,048,576, default 65,536.
	MaxBytes *int `json:"max_bytes,omitempty"`
}

// Dictionary describes one zstd dictionary of a topic on a node.
type Dictionary struct {
	// ID is the dictionary's id, as frames compressed with it name it.
	ID          uint32 `json:"id"`
	Bytes       int    `json:"bytes"`
	TrainedAtMs int64  `json:"trained_at_ms"`
	// Samples is the records it was trained on: in a training's answer
	// only.
	Samples int `json:"samples,omitempty"`
	// Current: new frames of the topic on this node are compressed with it.
	Current bool `json:"current"`
}

// DictionaryList is the answer of a topic's dictionaries GET: the current
// one first.
type DictionaryList struct {
	Dictionaries []Dictionary `json:"dictionaries"`
}
