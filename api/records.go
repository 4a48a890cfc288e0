package api

// ProduceRequest is a produce's JSON body. Keys and values are text, or
// base64 (standard, padded) with encoding=base64; a binary batch
// (BatchMediaType) carries them as bytes instead.
type ProduceRequest struct {
	Records []ProduceRecord `json:"records"`
}

// ProduceRecord is a record to produce: Value required ("" is an empty
// value), Key nil for no key.
type ProduceRecord struct {
	Key   *string `json:"key,omitempty"`
	Value string  `json:"value"`
}

// ProduceAnswer is a produce's answer, sent only after the durable
// commit: the first record's offset, how many there were, and the high
// watermark after them.
type ProduceAnswer struct {
	BaseOffset    int64 `json:"base_offset"`
	Count         int64 `json:"count"`
	HighWatermark int64 `json:"high_watermark"`
}

// FetchAnswer is a fetch's JSON answer (a binary one carries its
// records as BatchRecords and the rest in headers).
type FetchAnswer struct {
	Records       []Record `json:"records"`
	NextOffset    int64    `json:"next_offset"` // where to fetch next
	HighWatermark int64    `json:"high_watermark"`
	Incarnation   string   `json:"incarnation"` // the topic incarnation the records are of
}

// Record is a committed record in a JSON answer (a fetch, a cursor read,
// a queue consume). Key and Value are text, or base64 when the request
// asked for it or when Encoding is "base64": a text answer's record
// whose bytes are not valid UTF-8.
type Record struct {
	Offset        int64   `json:"offset"`
	Key           *string `json:"key,omitempty"` // nil: no key
	Value         string  `json:"value"`
	Encoding      string  `json:"encoding,omitempty"`
	CommittedAtMs int64   `json:"committed_at_ms"` // milliseconds since the epoch
}

// OffsetAnswer is a seek by time's answer: the offset of the first
// record committed at or after the time asked, or the high watermark when
// none is yet.
type OffsetAnswer struct {
	HighWatermark int64 `json:"high_watermark"`
	Offset        int64 `json:"offset"`
}
