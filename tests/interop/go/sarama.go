package main

// IBM/sarama: an idempotent SyncProducer with acks=all, and a consumer on explicit
// partitions or a ConsumerGroup.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_0_0_0
	cfg.ClientID = "baton-interop-sarama"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Retry.Max = 50
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.MaxMessageBytes = 4 << 20
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Fetch.Max = 16 << 20
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	return cfg
}

type saramaProducer struct {
	p     sarama.SyncProducer
	topic string
}

func newSaramaProducer(o options) (producer, error) {
	p, err := sarama.NewSyncProducer(o.bootstrap, saramaConfig())
	if err != nil {
		return nil, err
	}
	return &saramaProducer{p: p, topic: o.topic}, nil
}

// send ignores ctx: SyncProducer has no context; its own retries bound it.
func (p *saramaProducer) send(_ context.Context, batch []Record) []sent {
	msgs := make([]*sarama.ProducerMessage, len(batch))
	for i, r := range batch {
		msgs[i] = &sarama.ProducerMessage{
			Topic: p.topic, Partition: r.Partition,
			Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value),
		}
		for _, h := range r.Headers {
			msgs[i].Headers = append(msgs[i].Headers, sarama.RecordHeader{Key: []byte(h.Name), Value: h.Value})
		}
	}
	err := p.p.SendMessages(msgs)
	failed := map[*sarama.ProducerMessage]error{}
	var perMessage sarama.ProducerErrors
	if errors.As(err, &perMessage) {
		for _, e := range perMessage {
			failed[e.Msg] = e.Err
		}
	}
	out := make([]sent, len(batch))
	for i, m := range msgs {
		out[i] = sent{status: acked, partition: m.Partition, offset: m.Offset}
		if e, ok := failed[m]; ok || (err != nil && len(perMessage) == 0) {
			if !ok {
				e = err
			}
			out[i] = sent{status: unknown, partition: batch[i].Partition, offset: -1, err: e}
		}
	}
	return out
}

func (p *saramaProducer) close() {
	if err := p.p.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "sarama producer close: %v\n", err)
	}
}

func saramaRecord(m *sarama.ConsumerMessage) Record {
	rec := Record{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value}
	for _, h := range m.Headers {
		rec.Headers = append(rec.Headers, Header{Name: string(h.Key), Value: h.Value})
	}
	return rec
}

type saramaConsumer struct {
	o     options
	group sarama.ConsumerGroup
	plain sarama.Consumer
}

func newSaramaConsumer(o options, group bool) (consumer, error) {
	c := &saramaConsumer{o: o}
	var err error
	if group {
		c.group, err = sarama.NewConsumerGroup(o.bootstrap, o.group, saramaConfig())
	} else {
		c.plain, err = sarama.NewConsumer(o.bootstrap, saramaConfig())
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// groupHandler hands every claimed message to sink and marks it for commit.
type groupHandler struct{ sink func(Record) }

func (groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.sink(saramaRecord(m))
		s.MarkMessage(m, "")
	}
	return nil
}

func (c *saramaConsumer) run(ctx context.Context, sink func(Record)) error {
	if c.group != nil {
		go func() {
			for err := range c.group.Errors() {
				fmt.Fprintf(os.Stderr, "sarama group: %v\n", err)
			}
		}()
		for ctx.Err() == nil {
			if err := c.group.Consume(ctx, []string{c.o.topic}, groupHandler{sink}); err != nil && ctx.Err() == nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, c.o.partitions)
	for p := 0; p < c.o.partitions; p++ {
		pc, err := c.plain.ConsumePartition(c.o.topic, int32(p), sarama.OffsetOldest)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.AsyncClose()
			for {
				select {
				case m := <-pc.Messages():
					sink(saramaRecord(m))
				case e := <-pc.Errors():
					errs <- e
					return
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case e := <-errs:
		return e
	default:
		return nil
	}
}

func (c *saramaConsumer) close() {
	var err error
	if c.group != nil {
		err = c.group.Close()
	} else {
		err = c.plain.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sarama consumer close: %v\n", err)
	}
}
