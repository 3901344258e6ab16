package main

// The record files shared with tests/interop_go.rs. All integers are big-endian.
//
// Records file (written by the Rust test, read by producers):
//   u32 count, then per record: u32 partition, blob key, blob value,
//   u32 header count, per header: u32 name length, name, blob value.
// Consumed file (written by consumers): per record: i32 partition, i64 offset,
//   blob key, blob value, u32 header count, headers as above.
// Outcomes file (written by producers): per record sent, in file order:
//   u8 status (0 acknowledged, 2 unknown), i32 partition, i64 offset (-1 if the
//   client does not report it), then a u16-length error text.
// A blob is an i32 length (-1 for null) and that many bytes.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// Header is one record header.
type Header struct {
	Name  string
	Value []byte
}

// Record is one record of the records file, or one consumed record.
type Record struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
}

type reader struct {
	r   *bufio.Reader
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	b := make([]byte, n)
	_, r.err = io.ReadFull(r.r, b)
	return b
}

func (r *reader) u32() uint32 {
	b := r.bytes(4)
	if r.err != nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func (r *reader) blob() []byte {
	n := int32(r.u32())
	if n < 0 {
		return nil
	}
	if n > 16<<20 {
		r.err = fmt.Errorf("blob of %d bytes", n)
		return nil
	}
	return r.bytes(int(n))
}

// readRecords reads a records file.
func readRecords(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &reader{r: bufio.NewReader(f)}
	count := r.u32()
	var out []Record
	for i := uint32(0); i < count && r.err == nil; i++ {
		rec := Record{Partition: int32(r.u32()), Key: r.blob(), Value: r.blob()}
		for h := r.u32(); h > 0 && r.err == nil; h-- {
			name := string(r.bytes(int(r.u32())))
			rec.Headers = append(rec.Headers, Header{Name: name, Value: r.blob()})
		}
		out = append(out, rec)
	}
	if r.err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, r.err)
	}
	return out, nil
}

type writer struct {
	w *bufio.Writer
	f *os.File
}

func createWriter(path string) (*writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &writer{w: bufio.NewWriter(f), f: f}, nil
}

func (w *writer) u8(v uint8)   { w.w.WriteByte(v) }
func (w *writer) u16(v uint16) { w.w.Write(binary.BigEndian.AppendUint16(nil, v)) }
func (w *writer) u32(v uint32) { w.w.Write(binary.BigEndian.AppendUint32(nil, v)) }
func (w *writer) u64(v uint64) { w.w.Write(binary.BigEndian.AppendUint64(nil, v)) }

func (w *writer) blob(b []byte) {
	if b == nil {
		w.u32(0xffffffff)
		return
	}
	w.u32(uint32(len(b)))
	w.w.Write(b)
}

// consumed appends one consumed record.
func (w *writer) consumed(r Record) {
	w.u32(uint32(r.Partition))
	w.u64(uint64(r.Offset))
	w.blob(r.Key)
	w.blob(r.Value)
	w.u32(uint32(len(r.Headers)))
	for _, h := range r.Headers {
		w.u32(uint32(len(h.Name)))
		w.w.WriteString(h.Name)
		w.blob(h.Value)
	}
}

// Produce outcomes.
const (
	acked   = 0
	unknown = 2
)

// outcome appends one produce outcome.
func (w *writer) outcome(status uint8, partition int32, offset int64, err error) {
	w.u8(status)
	w.u32(uint32(partition))
	w.u64(uint64(offset))
	text := ""
	if err != nil {
		text = err.Error()
	}
	if len(text) > 1000 {
		text = text[:1000]
	}
	w.u16(uint16(len(text)))
	w.w.WriteString(text)
}

func (w *writer) close() error {
	if err := w.w.Flush(); err != nil {
		return err
	}
	return w.f.Close()
}
