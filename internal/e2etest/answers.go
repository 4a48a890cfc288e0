package e2etest

// The answers' types as docs/http-api.md gives them, apart from the
// server's own, so a renamed field fails a test.

// BatchContentType is the binary batch's media type (docs/http-api.md).
const BatchContentType = "application/vnd.narad.batch"

// MaxFetchBytes is the largest max_bytes a read may ask for
// (docs/http-api.md).
const MaxFetchBytes = 64 << 20

// ErrorBody is an error answer.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	NextOffset *int64 `json:"next_offset"`
}

// Fetched is a fetch's JSON answer.
type Fetched struct {
	Records []struct {
		Offset        int64   `json:"offset"`
		Key           *string `json:"key"`
		Value         string  `json:"value"`
		CommittedAtMs int64   `json:"committed_at_ms"`
	} `json:"records"`
	NextOffset    int64 `json:"next_offset"`
	HighWatermark int64 `json:"high_watermark"`
}
