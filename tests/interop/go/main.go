// Command interop-go drives the Go Kafka clients against baton-broker for
// tests/interop_go.rs.
//
//	interop-go <kafkago|franz|sarama> <produce|consume-partitions|consume-group> [flags]
//
// Producers send the records of -records (see records.go) in file order, each to
// the partition it names, and write one outcome per record to -out. With -follow
// they keep producing (in batches, printing "PROGRESS sent acked unknown" lines)
// until their stdin closes, so the test can fail the cluster over meanwhile.
// Consumers read from the earliest offset until every partition reaches the end
// offsets of -ends (a comma list, or "stdin" for an "ends e0,e1,..." line read
// later) and write every record they received, in order, to -out.
// Each run ends with one "RESULT {json}" line on stdout.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

type options struct {
	bootstrap    []string
	topic        string
	records      string
	out          string
	group        string
	ends         string
	partitions   int
	batch        int
	timeout      time.Duration
	follow       bool
	pause        time.Duration
	reuseBuffers bool
	deadline     time.Duration
}

// sent is what a producer reports for one record.
type sent struct {
	status    uint8
	partition int32
	offset    int64
	err       error
}

// producer sends one batch and reports one outcome per record, in order.
type producer interface {
	send(ctx context.Context, batch []Record) []sent
	close()
}

// consumer delivers records to sink until ctx ends.
type consumer interface {
	run(ctx context.Context, sink func(Record)) error
	close()
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: interop-go <kafkago|franz|sarama> <produce|consume-partitions|consume-group> [flags]")
	}
	lib, role := os.Args[1], os.Args[2]
	var o options
	fs := flag.NewFlagSet(lib+" "+role, flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "", "comma-separated host:port list")
	fs.StringVar(&o.topic, "topic", "", "topic")
	fs.StringVar(&o.records, "records", "", "records file to produce")
	fs.StringVar(&o.out, "out", "", "outcomes or consumed file to write")
	fs.StringVar(&o.group, "group", "", "consumer group id")
	fs.StringVar(&o.ends, "ends", "", "end offsets per partition, or stdin")
	fs.IntVar(&o.partitions, "partitions", 3, "partitions of the topic")
	fs.IntVar(&o.batch, "batch", 100, "records per send call")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "context timeout of one send call")
	fs.BoolVar(&o.follow, "follow", false, "produce until stdin closes")
	fs.DurationVar(&o.pause, "pause", 0, "pause between batches")
	fs.BoolVar(&o.reuseBuffers, "reuse-buffers", false, "overwrite a batch's values after a failed send, as a buffer pool would")
	fs.DurationVar(&o.deadline, "deadline", 90*time.Second, "give up after this long")
	fs.Parse(os.Args[3:])
	o.bootstrap = strings.Split(*bootstrap, ",")

	ctx, cancel := context.WithTimeout(context.Background(), o.deadline)
	defer cancel()
	var result map[string]any
	var err error
	switch role {
	case "produce":
		var p producer
		if p, err = newProducer(lib, o); err == nil {
			result, err = produce(ctx, p, o)
		}
	case "consume-partitions", "consume-group":
		var c consumer
		if c, err = newConsumer(lib, role == "consume-group", o); err == nil {
			result, err = consume(ctx, c, o)
		}
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if result == nil {
		result = map[string]any{}
	}
	result["ok"] = err == nil
	if err != nil {
		result["error"] = err.Error()
	}
	line, _ := json.Marshal(result)
	fmt.Printf("RESULT %s\n", line)
}

func fail(msg string) {
	fmt.Printf("RESULT {\"ok\":false,\"error\":%q}\n", msg)
	os.Exit(2)
}

func newProducer(lib string, o options) (producer, error) {
	switch lib {
	case "kafkago":
		return newKafkaGoProducer(o), nil
	case "franz":
		return newFranzProducer(o)
	case "sarama":
		return newSaramaProducer(o)
	}
	return nil, fmt.Errorf("unknown client %q", lib)
}

func newConsumer(lib string, group bool, o options) (consumer, error) {
	switch lib {
	case "kafkago":
		return newKafkaGoConsumer(o, group), nil
	case "franz":
		return newFranzConsumer(o, group)
	case "sarama":
		return newSaramaConsumer(o, group)
	}
	return nil, fmt.Errorf("unknown client %q", lib)
}

// closedStdin is set once stdin reaches EOF.
func watchStdin(lines chan<- string) *atomic.Bool {
	var closed atomic.Bool
	go func() {
		s := bufio.NewScanner(os.Stdin)
		for s.Scan() {
			if lines != nil {
				lines <- s.Text()
			}
		}
		closed.Store(true)
	}()
	return &closed
}

func produce(ctx context.Context, p producer, o options) (map[string]any, error) {
	defer p.close()
	records, err := readRecords(o.records)
	if err != nil {
		return nil, err
	}
	out, err := createWriter(o.out)
	if err != nil {
		return nil, err
	}
	var stop *atomic.Bool
	if o.follow {
		stop = watchStdin(nil)
	}
	var ack, unk int
	firstErr := ""
	next := 0
	for next < len(records) && ctx.Err() == nil {
		if stop != nil && stop.Load() {
			break
		}
		end := min(next+o.batch, len(records))
		batch := records[next:end]
		callCtx, cancel := context.WithTimeout(ctx, o.timeout)
		results := p.send(callCtx, batch)
		cancel()
		for i, r := range results {
			out.outcome(r.status, r.partition, r.offset, r.err)
			if r.status == acked {
				ack++
				continue
			}
			unk++
			if firstErr == "" && r.err != nil {
				firstErr = r.err.Error()
			}
			if o.reuseBuffers {
				for j := range batch[i].Value {
					batch[i].Value[j] = 0xEE
				}
			}
		}
		next = end
		if o.follow {
			fmt.Printf("PROGRESS %d %d %d\n", next, ack, unk)
			time.Sleep(o.pause)
		}
	}
	if err := out.close(); err != nil {
		return nil, err
	}
	res := map[string]any{
		"sent": next, "acked": ack, "unknown": unk, "first_error": firstErr,
		"exhausted": o.follow && next == len(records),
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("deadline reached after %d records", next)
	}
	return res, nil
}

func parseEnds(s string) ([]int64, error) {
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "ends"))
	var ends []int64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad end offsets %q: %w", s, err)
		}
		ends = append(ends, v)
	}
	return ends, nil
}

func consume(ctx context.Context, c consumer, o options) (map[string]any, error) {
	defer c.close()
	out, err := createWriter(o.out)
	if err != nil {
		return nil, err
	}
	endsCh := make(chan []int64, 1)
	if o.ends == "stdin" {
		lines := make(chan string, 1)
		watchStdin(lines)
		go func() {
			for l := range lines {
				if e, err := parseEnds(l); err == nil {
					endsCh <- e
					return
				}
			}
		}()
	} else {
		e, err := parseEnds(o.ends)
		if err != nil {
			return nil, err
		}
		endsCh <- e
	}
	recs := make(chan Record, 1024)
	runCtx, stopRun := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() {
		runErr <- c.run(runCtx, func(r Record) {
			select {
			case recs <- r:
			case <-runCtx.Done():
			}
		})
	}()

	next := make([]int64, o.partitions) // next offset expected from each partition
	var ends []int64
	count := 0
	done := func() bool {
		if ends == nil {
			return false
		}
		for p, e := range ends {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	var failure error
	for !done() && failure == nil {
		select {
		case r := <-recs:
			out.consumed(r)
			count++
			if int(r.Partition) < len(next) && r.Offset+1 > next[r.Partition] {
				next[r.Partition] = r.Offset + 1
			}
		case e := <-endsCh:
			if len(e) != o.partitions {
				failure = fmt.Errorf("%d end offsets for %d partitions", len(e), o.partitions)
			}
			ends = e
		case err := <-runErr:
			failure = fmt.Errorf("consumer stopped: %v", err)
		case <-ctx.Done():
			failure = fmt.Errorf("deadline: reached %v of %v", next, ends)
		}
	}
	stopRun()
	if err := out.close(); err != nil {
		return nil, err
	}
	return map[string]any{"consumed": count, "next": next}, failure
}
