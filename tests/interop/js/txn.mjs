// Transactions of the JavaScript Kafka clients, for the interop tests
// (tests/interop_suite/interop_js.rs): kafkajs 2.2.4 and @platformatic/kafka 2.12,
// pinned in package.json and installed with `npm ci` (by .ci/run).
//
// Usage:
//   node txn.mjs LIB transact BOOTSTRAP INPUT OUTPUT GROUP TXN_ID PARTITIONS BATCH BATCHES
//   node txn.mjs LIB read     BOOTSTRAP TOPIC GROUP EXPECTED [ISOLATION]
// with LIB `kafkajs` or `platformatic`.
//
// `transact` is a consume-transform-produce loop: a consumer in GROUP reads the
// BATCH * BATCHES records of partition 0 of INPUT (values `in-<i>`, i from 0), and
// a transactional producer (TXN_ID) writes `out-<i>-a<attempt>` for each to
// partition i % PARTITIONS of OUTPUT, with the input offsets sent to the
// transaction (kafkajs `sendOffsets`, @platformatic/kafka `addConsumer` and
// `addOffset`). Batch 0 commits; batch 1 is aborted once (attempt 0), then the
// committed offset of GROUP is read back (it must still be batch 0's end), and
// batch 1 is redone and committed (attempt 1); every later batch commits. The
// final committed offset of GROUP is printed too.
//
// `read` is a group consumer (a fresh GROUP, from the earliest offset) of TOPIC
// at ISOLATION, `committed` (the default) or `uncommitted`: it prints every
// record it receives, and stops EXPECTED records later plus a quiet second (so
// extra records would be seen).
//
// Every line on stdout is one flat JSON object: `{"event": ...}` for the steps,
// `{"event": "record", ...}` for each record read; the clients' logs go to
// stderr. Exit status 0 on success; on failure the error goes to stderr, exit
// status 1.

import { Kafka, logLevel } from 'kafkajs'
import {
  Consumer,
  FetchIsolationLevels,
  Producer,
  stringDeserializers,
  stringSerializers
} from '@platformatic/kafka'

// Longest any command may run.
const TIMEOUT_MS = Number(process.env.INTEROP_CLIENT_TIMEOUT_MS ?? 120000)
// Longest a committed offset may take to show a transaction's outcome.
const OFFSET_SETTLE_MS = 15000
// How long the committed offset must stay at batch 0's end after the abort.
const ABORT_HOLD_MS = 1000
// How long a reader keeps reading after its expected count, for extra records.
const QUIET_MS = 1000
// kafkajs retries requests that fail with a retriable error this often.
const KAFKAJS_RETRIES = 10

function emit (object) {
  process.stdout.write(JSON.stringify(object) + '\n')
}

function log (...args) {
  process.stderr.write(args.join(' ') + '\n')
}

function sleep (ms) {
  return new Promise(resolve => setTimeout(resolve, ms))
}

// The output record for input `i` in `attempt`.
function outRecord (i, attempt, partitions) {
  return { key: `k-${i}`, value: `out-${i}-a${attempt}`, partition: i % partitions }
}

// The committed offset `fetch()` gives once it has equalled `expected` for
// `holdMs`, or the last one seen after OFFSET_SETTLE_MS. EndTxn answers before
// the coordinator has written the markers (Apache Kafka writes them after its
// answer), so a commit's offsets become visible a moment later; an abort's must
// never, which holding the expected value for a while checks.
async function settledOffset (fetch, expected, holdMs) {
  const deadline = Date.now() + OFFSET_SETTLE_MS
  let since = null
  let offset
  while (Date.now() < deadline) {
    offset = await fetch()
    if (offset !== expected) since = null
    else if (since === null) since = Date.now()
    if (since !== null && Date.now() - since >= holdMs) break
    await sleep(100)
  }
  return offset
}

// Whether ISOLATION (`committed` or `uncommitted`) reads uncommitted records.
function readUncommitted (isolation) {
  if (isolation !== 'committed' && isolation !== 'uncommitted') throw new Error(`isolation ${isolation}?`)
  return isolation === 'uncommitted'
}

// The attempts a batch gets: batch 1 is aborted once.
function attempts (batch) {
  return batch === 1 ? [{ attempt: 0, commit: false }, { attempt: 1, commit: true }] : [{ attempt: 0, commit: true }]
}

// ---------------------------------------------------------------------------
// kafkajs

function kafkajs (bootstrap, clientId) {
  // Records name their partitions, so kafkajs' v2 partitioner warning is moot.
  process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
  return new Kafka({
    clientId,
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    retry: { retries: KAFKAJS_RETRIES },
    logCreator: () => ({ namespace, level, log: entry }) => {
      const { message, ...extra } = entry
      log(`kafkajs ${namespace} level ${level}: ${message} ${JSON.stringify(extra)}`)
    }
  })
}

// Reads `count` records of `topic` partition 0 in `group` (no offsets committed by
// the consumer itself) and leaves the group.
async function kafkajsReadInput (kafka, topic, group, count) {
  const consumer = kafka.consumer({ groupId: group, readUncommitted: false })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const input = []
  let done
  const finished = new Promise(resolve => { done = resolve })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      if (partition === 0 && input.length < count) {
        input.push({ offset: BigInt(message.offset), value: message.value.toString() })
        if (input.length === count) done()
      }
    }
  })
  await finished
  await consumer.disconnect()
  return input
}

async function kafkajsFetchCommitted (admin, group, topic) {
  const topics = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  const p0 = topics[0].partitions.find(p => p.partition === 0)
  return Number(p0.offset)
}

async function kafkajsTransact (bootstrap, input, output, group, txnId, partitions, batch, batches) {
  const kafka = kafkajs(bootstrap, `interop-kafkajs-${txnId}`)
  const records = await kafkajsReadInput(kafka, input, group, batch * batches)
  emit({ event: 'input', count: records.length })
  const admin = kafka.admin()
  await admin.connect()
  const producer = kafka.producer({ transactionalId: txnId, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  emit({ event: 'init', txn_id: txnId })
  for (let b = 0; b < batches; b++) {
    const slice = records.slice(b * batch, (b + 1) * batch)
    for (const { attempt, commit } of attempts(b)) {
      const txn = await producer.transaction()
      const byPartition = new Map()
      for (const r of slice) {
        const i = Number(r.value.slice('in-'.length))
        const out = outRecord(i, attempt, partitions)
        if (!byPartition.has(out.partition)) byPartition.set(out.partition, [])
        byPartition.get(out.partition).push(out)
      }
      await txn.send({ topic: output, messages: [...byPartition.values()].flat() })
      const next = slice[slice.length - 1].offset + 1n
      await txn.sendOffsets({
        consumerGroupId: group,
        topics: [{ topic: input, partitions: [{ partition: 0, offset: next.toString() }] }]
      })
      if (commit) await txn.commit()
      else await txn.abort()
      emit({ event: commit ? 'commit' : 'abort', batch: b, attempt, records: slice.length, offset: Number(next) })
      if (!commit) {
        const offset = await settledOffset(() => kafkajsFetchCommitted(admin, group, input), b * batch, ABORT_HOLD_MS)
        emit({ event: 'committed-offset', after: 'abort', offset })
      }
    }
  }
  const offset = await settledOffset(() => kafkajsFetchCommitted(admin, group, input), batch * batches, 0)
  emit({ event: 'committed-offset', after: 'end', offset })
  await producer.disconnect()
  await admin.disconnect()
}

async function kafkajsRead (bootstrap, topic, group, expected, isolation = 'committed') {
  const kafka = kafkajs(bootstrap, `interop-kafkajs-reader-${group}`)
  // readUncommitted: false is read_committed (kafkajs' default).
  const consumer = kafka.consumer({ groupId: group, readUncommitted: readUncommitted(isolation) })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  let count = 0
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      count++
      emit({
        event: 'record',
        partition,
        offset: Number(message.offset),
        key: message.key?.toString() ?? null,
        value: message.value?.toString() ?? null
      })
    }
  })
  while (count < expected) await sleep(50)
  await sleep(QUIET_MS)
  await consumer.disconnect()
  emit({ event: 'read', count })
}

// ---------------------------------------------------------------------------
// @platformatic/kafka

function platformaticBase (bootstrap, clientId) {
  return { clientId, bootstrapBrokers: [bootstrap], retries: 10, retryDelay: 250 }
}

// Consumes `count` records of `topic` partition 0 as a member of `group`; the
// consumer stays in the group (its messages carry the member's metadata, which
// `addOffset` sends with TxnOffsetCommit). Returns the consumer, its stream and
// the messages.
async function platformaticReadInput (bootstrap, topic, group, count) {
  const consumer = new Consumer({
    ...platformaticBase(bootstrap, `interop-platformatic-input-${group}`),
    groupId: group,
    deserializers: stringDeserializers
  })
  const stream = await consumer.consume({
    topics: [topic],
    mode: 'earliest',
    autocommit: false,
    isolationLevel: FetchIsolationLevels.READ_COMMITTED,
    sessionTimeout: 10000,
    heartbeatInterval: 500
  })
  const messages = []
  for await (const message of stream) {
    if (message.partition === 0) messages.push(message)
    if (messages.length === count) break
  }
  return { consumer, stream, messages }
}

async function platformaticFetchCommitted (consumer, topic) {
  const offsets = await consumer.listCommittedOffsets({ topics: [{ topic, partitions: [0] }] })
  return Number(offsets.get(topic)[0])
}

async function platformaticTransact (bootstrap, input, output, group, txnId, partitions, batch, batches) {
  const { consumer, stream, messages } = await platformaticReadInput(bootstrap, input, group, batch * batches)
  emit({ event: 'input', count: messages.length })
  const producer = new Producer({
    ...platformaticBase(bootstrap, `interop-platformatic-${txnId}`),
    transactionalId: txnId,
    idempotent: true,
    serializers: stringSerializers
  })
  let initialised = false
  for (let b = 0; b < batches; b++) {
    const slice = messages.slice(b * batch, (b + 1) * batch)
    for (const { attempt, commit } of attempts(b)) {
      const txn = await producer.beginTransaction()
      if (!initialised) {
        emit({ event: 'init', txn_id: txnId })
        initialised = true
      }
      const outs = slice.map(m => {
        const i = Number(m.value.slice('in-'.length))
        const out = outRecord(i, attempt, partitions)
        return { topic: output, key: out.key, value: out.value, partition: out.partition }
      })
      await txn.send({ messages: outs })
      await txn.addConsumer(consumer)
      await txn.addOffset(slice[slice.length - 1])
      if (commit) await txn.commit()
      else await txn.abort()
      const next = Number(slice[slice.length - 1].offset) + 1
      emit({ event: commit ? 'commit' : 'abort', batch: b, attempt, records: slice.length, offset: next })
      if (!commit) {
        const offset = await settledOffset(() => platformaticFetchCommitted(consumer, input), b * batch, ABORT_HOLD_MS)
        emit({ event: 'committed-offset', after: 'abort', offset })
      }
    }
  }
  const offset = await settledOffset(() => platformaticFetchCommitted(consumer, input), batch * batches, 0)
  emit({ event: 'committed-offset', after: 'end', offset })
  await producer.close()
  await stream.close()
  await consumer.close()
}

async function platformaticRead (bootstrap, topic, group, expected, isolation = 'committed') {
  const consumer = new Consumer({
    ...platformaticBase(bootstrap, `interop-platformatic-reader-${group}`),
    groupId: group,
    deserializers: stringDeserializers
  })
  const stream = await consumer.consume({
    topics: [topic],
    mode: 'earliest',
    autocommit: false,
    isolationLevel: readUncommitted(isolation)
      ? FetchIsolationLevels.READ_UNCOMMITTED
      : FetchIsolationLevels.READ_COMMITTED,
    sessionTimeout: 10000,
    heartbeatInterval: 500,
    maxWaitTime: 200
  })
  let count = 0
  let quietUntil = Infinity
  stream.on('data', message => {
    count++
    emit({
      event: 'record',
      partition: message.partition,
      offset: Number(message.offset),
      key: message.key ?? null,
      value: message.value ?? null
    })
    if (count >= expected && quietUntil === Infinity) quietUntil = Date.now() + QUIET_MS
  })
  while (Date.now() < quietUntil || quietUntil === Infinity) await sleep(50)
  await stream.close()
  await consumer.close()
  emit({ event: 'read', count })
}

// ---------------------------------------------------------------------------

const COMMANDS = {
  kafkajs: { transact: kafkajsTransact, read: kafkajsRead },
  platformatic: { transact: platformaticTransact, read: platformaticRead }
}

async function main (argv) {
  const [lib, command, bootstrap, ...rest] = argv
  const run = COMMANDS[lib]?.[command]
  if (!run) throw new Error(`usage: txn.mjs kafkajs|platformatic transact|read BOOTSTRAP ... (got ${argv.join(' ')})`)
  const args = rest.map(a => (/^\d+$/.test(a) ? Number(a) : a))
  await run(bootstrap, ...args)
}

const timer = setTimeout(() => {
  log(`txn.mjs: timed out after ${TIMEOUT_MS} ms`)
  process.exit(1)
}, TIMEOUT_MS)

main(process.argv.slice(2)).then(
  () => {
    clearTimeout(timer)
    process.exit(0)
  },
  error => {
    log(`txn.mjs: ${error?.stack ?? error}`)
    if (error?.errors) log(`caused by: ${JSON.stringify(error.errors, null, 1)}`)
    process.exit(1)
  }
)
