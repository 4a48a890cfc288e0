package api

// CreateCursorRequest is the optional body of a cursor's PUT: where the
// new cursor starts, "earliest" (the default) or "latest".
type CreateCursorRequest struct {
	From *string `json:"from"`
}

// Cursor is a fan-out cursor: the answer of its PUT and GET.
type Cursor struct {
	Name       string           `json:"name"`
	Partitions []CursorPosition `json:"partitions"`
}

// CursorPosition is a fan-out cursor's place in one partition.
type CursorPosition struct {
	Partition     int   `json:"partition"`
	Position      int64 `json:"position"` // the next offset it reads
	HighWatermark int64 `json:"high_watermark"`
	Lag           int64 `json:"lag"`
}

// CommitCursorRequest is the body of a cursor's commit in one partition:
// its new position (required), at most the high watermark.
type CommitCursorRequest struct {
	Position *int64 `json:"position"`
}

// CommitCursorAnswer is a cursor commit's answer.
type CommitCursorAnswer struct {
	Position int64 `json:"position"`
}

// CursorReadAnswer is a read through a cursor: the records, where the
// cursor stands after them, and how many records of damaged frames it
// stepped over (never served).
type CursorReadAnswer struct {
	Records       []Record `json:"records"`
	NextOffset    int64    `json:"next_offset"`
	HighWatermark int64    `json:"high_watermark"`
	Incarnation   string   `json:"incarnation"`
	Skipped       int64    `json:"skipped"`
}
