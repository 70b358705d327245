package compattests

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTripStrict is roundTrip plus a canonical-encoding check: the
// response body, decoded by kmsg at the request's version and encoded
// again, must give back exactly the bytes the broker sent (no trailing
// bytes, no fields of the wrong width).
func (c *rawConn) roundTripStrict(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	if _, err := c.Write(c.frame(req)); err != nil {
		t.Fatalf("write %T v%d: %v", req, req.GetVersion(), err)
	}
	buf, err := c.readFrame(15 * time.Second)
	if err != nil {
		t.Fatalf("reading response to %T v%d: %v", req, req.GetVersion(), err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	flexHeader := req.IsFlexible() && req.Key() != 18
	if err := parseResponse(buf, c.corr, resp, flexHeader); err != nil {
		t.Fatalf("parsing response to %T v%d: %v", req, req.GetVersion(), err)
	}
	body := buf[4:]
	if flexHeader {
		body, _ = skipTags(body)
	}
	if again := resp.AppendTo(nil); !bytes.Equal(again, body) {
		i := 0
		for i < len(again) && i < len(body) && again[i] == body[i] {
			i++
		}
		t.Errorf("%T v%d: response body is %d bytes, kmsg re-encodes it as %d; first difference at byte %d\nbroker: %x\nkmsg:   %x",
			resp, req.GetVersion(), len(body), len(again), i, clip(body, i), clip(again, i))
	}
	return resp
}

func clip(b []byte, at int) []byte {
	from := max(0, at-8)
	return b[from:min(len(b), at+24)]
}

// TestProtocolVersionSweep sends every advertised version of every served
// API over raw TCP and checks the answer decodes exactly at that version
// and says the right thing.
func TestProtocolVersionSweep(t *testing.T) {
	b := startBroker(t, t.TempDir())
	c := dialRaw(t, b.Addr)
	const topic = "sweep"
	const parts = 3
	createTopic(t, newAdmin(t, b.Addr), topic, parts, map[string]*string{"retention.ms": kadmStr("123456")})

	// The advertised ranges drive the sweep.
	avReq := kmsg.NewPtrApiVersionsRequest()
	avReq.Version = 0
	av := c.roundTripStrict(t, avReq).(*kmsg.ApiVersionsResponse)
	ranges := map[int16][2]int16{}
	for _, k := range av.ApiKeys {
		ranges[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[int16][2]int16{0: {0, 13}, 1: {4, 18}, 2: {0, 11}, 3: {0, 13}, 18: {0, 5}, 19: {0, 7}, 20: {0, 6}, 22: {0, 5}, 32: {0, 4}}
	for k, r := range want {
		if ranges[k] != r {
			t.Errorf("ApiVersions: key %d advertised %v, want %v", k, ranges[k], r)
		}
	}
	versions := func(key int16) []int16 {
		var out []int16
		r, ok := ranges[key]
		if !ok {
			return nil
		}
		for v := r[0]; v <= r[1]; v++ {
			out = append(out, v)
		}
		return out
	}

	var nodeID int32
	var topicID [16]byte
	t.Run("ApiVersions", func(t *testing.T) {
		for _, v := range versions(18) {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version = v
			req.ClientSoftwareName, req.ClientSoftwareVersion = "fjord-compat", "1.0.0"
			resp := c.roundTripStrict(t, req).(*kmsg.ApiVersionsResponse)
			if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(av.ApiKeys) {
				t.Errorf("ApiVersions v%d: error %d, %d keys (v0 gave %d)", v, resp.ErrorCode, len(resp.ApiKeys), len(av.ApiKeys))
			}
		}
	})

	t.Run("Metadata", func(t *testing.T) {
		for _, v := range versions(3) {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = v
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTripStrict(t, req).(*kmsg.MetadataResponse)
			if len(resp.Brokers) != 1 || fmt.Sprintf("%s:%d", resp.Brokers[0].Host, resp.Brokers[0].Port) != b.Addr {
				t.Errorf("Metadata v%d: brokers %+v, want one at %s", v, resp.Brokers, b.Addr)
				continue
			}
			nodeID = resp.Brokers[0].NodeID
			if v >= 1 && resp.ControllerID != nodeID {
				t.Errorf("Metadata v%d: controller %d, want %d", v, resp.ControllerID, nodeID)
			}
			if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID == "") {
				t.Errorf("Metadata v%d: no cluster id", v)
			}
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != parts {
				t.Errorf("Metadata v%d: topics %+v", v, resp.Topics)
				continue
			}
			mt := resp.Topics[0]
			if mt.Topic == nil || *mt.Topic != topic {
				t.Errorf("Metadata v%d: topic name %v", v, mt.Topic)
			}
			if v >= 10 {
				if mt.TopicID == ([16]byte{}) {
					t.Errorf("Metadata v%d: zero topic id", v)
				}
				topicID = mt.TopicID
			}
			for _, p := range mt.Partitions {
				if p.ErrorCode != 0 || p.Leader != nodeID || len(p.Replicas) != 1 || len(p.ISR) != 1 {
					t.Errorf("Metadata v%d: partition %+v", v, p)
				}
			}
		}
		// Unknown topic, without auto-creation (v4+ can say so).
		for _, v := range versions(3) {
			if v < 4 {
				continue
			}
			req := kmsg.NewPtrMetadataRequest()
			req.Version = v
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("sweep-unknown")
			req.Topics = append(req.Topics, rt)
			req.AllowAutoTopicCreation = false
			resp := c.roundTripStrict(t, req).(*kmsg.MetadataResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Errorf("Metadata v%d for an unknown topic without auto-create: %+v", v, resp.Topics)
			}
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	// Produce: one single-record batch per version into partition 0, each
	// at the next offset.
	var produced int64
	t.Run("Produce", func(t *testing.T) {
		for _, v := range versions(0) {
			if v < 3 {
				continue // magic 0/1 message sets: not supported
			}
			req := kmsg.NewPtrProduceRequest()
			req.Version = v
			req.Acks = -1
			req.TimeoutMillis = 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = topic, topicID // v13+ names it by id
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = 0
			rp.Records = recordBatch(t, []byte(fmt.Sprintf("v%d", v)), []byte(fmt.Sprintf("produced with v%d", v)))
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTripStrict(t, req).(*kmsg.ProduceResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Errorf("Produce v%d: %+v", v, resp)
				continue
			}
			if v >= 13 && resp.Topics[0].TopicID != topicID {
				t.Errorf("Produce v%d: topic id %x, want %x", v, resp.Topics[0].TopicID, topicID)
			}
			sp := resp.Topics[0].Partitions[0]
			if sp.ErrorCode != 0 || sp.BaseOffset != produced {
				t.Errorf("Produce v%d: error %d base offset %d, want 0 and %d", v, sp.ErrorCode, sp.BaseOffset, produced)
				continue
			}
			if v >= 2 && sp.LogAppendTime != -1 {
				t.Errorf("Produce v%d: log append time %d on a CreateTime topic, want -1", v, sp.LogAppendTime)
			}
			if v >= 5 && sp.LogStartOffset != 0 {
				t.Errorf("Produce v%d: log start offset %d, want 0", v, sp.LogStartOffset)
			}
			produced++
		}
		// Unknown partition and topic.
		for _, v := range []int16{3, 9, 11} {
			req := kmsg.NewPtrProduceRequest()
			req.Version = v
			req.Acks = -1
			req.TimeoutMillis = 5000
			for _, tp := range []struct {
				topic string
				part  int32
			}{{topic, 99}, {"sweep-unknown", 0}} {
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = tp.topic
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = tp.part
				rp.Records = recordBatch(t, nil, []byte("x"))
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
			}
			resp := c.roundTripStrict(t, req).(*kmsg.ProduceResponse)
			for _, st := range resp.Topics {
				for _, sp := range st.Partitions {
					if sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
						t.Errorf("Produce v%d to %s[%d]: error %d, want UNKNOWN_TOPIC_OR_PARTITION", v, st.Topic, sp.Partition, sp.ErrorCode)
					}
				}
			}
		}
	})

	t.Run("Fetch", func(t *testing.T) {
		for _, v := range versions(1) {
			req := kmsg.NewPtrFetchRequest()
			req.Version = v
			req.ReplicaID = -1
			req.ReplicaState.ID = -1
			req.ReplicaState.Epoch = -1
			req.MaxWaitMillis = 0
			req.MaxBytes = 1 << 20
			req.SessionID, req.SessionEpoch = 0, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, topicID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset = 0, 0, 1<<20, -1
			rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTripStrict(t, req).(*kmsg.FetchResponse)
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Errorf("Fetch v%d: error %d, %+v", v, resp.ErrorCode, resp.Topics)
				continue
			}
			st := resp.Topics[0]
			if v >= 13 && st.TopicID != topicID {
				t.Errorf("Fetch v%d: topic id %x, want %x", v, st.TopicID, topicID)
			}
			if v < 13 && st.Topic != topic {
				t.Errorf("Fetch v%d: topic %q", v, st.Topic)
			}
			sp := st.Partitions[0]
			if sp.ErrorCode != 0 || sp.HighWatermark != produced || (v >= 4 && sp.LastStableOffset != produced) {
				t.Errorf("Fetch v%d: error %d HW %d LSO %d, want 0, %d, %d", v, sp.ErrorCode, sp.HighWatermark, sp.LastStableOffset, produced, produced)
			}
			if v >= 5 && sp.LogStartOffset != 0 {
				t.Errorf("Fetch v%d: log start offset %d", v, sp.LogStartOffset)
			}
			n, err := countRecords(sp.RecordBatches)
			if err != nil || int64(n) != produced {
				t.Errorf("Fetch v%d: %d records (%v), want %d", v, n, err, produced)
			}
		}
		// Fetch v13+ with an unknown topic id; v4+ with an unknown topic.
		for _, v := range versions(1) {
			req := kmsg.NewPtrFetchRequest()
			req.Version = v
			req.ReplicaID, req.ReplicaState.ID, req.ReplicaState.Epoch = -1, -1, -1
			req.MaxBytes = 1 << 20
			req.SessionEpoch = -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "sweep-unknown", [16]byte{1, 2, 3}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes, rp.LogStartOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = 0, 1<<20, -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTripStrict(t, req).(*kmsg.FetchResponse)
			wantCode := kerr.UnknownTopicOrPartition.Code
			if v >= 13 {
				wantCode = kerr.UnknownTopicID.Code
			}
			got := resp.ErrorCode
			if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
				got = resp.Topics[0].Partitions[0].ErrorCode
			}
			if got != wantCode {
				t.Errorf("Fetch v%d of an unknown topic: error %d, want %d", v, got, wantCode)
			}
		}
	})

	t.Run("ListOffsets", func(t *testing.T) {
		for _, v := range versions(2) {
			for _, ts := range []int64{-1, -2} {
				req := kmsg.NewPtrListOffsetsRequest()
				req.Version = v
				req.ReplicaID = -1
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp, rp.MaxNumOffsets, rp.CurrentLeaderEpoch = 0, ts, 1, -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp := c.roundTripStrict(t, req).(*kmsg.ListOffsetsResponse)
				if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					t.Errorf("ListOffsets v%d: %+v", v, resp)
					continue
				}
				sp := resp.Topics[0].Partitions[0]
				wantOff := produced
				if ts == -2 {
					wantOff = 0
				}
				got := sp.Offset
				if v == 0 {
					got = -100
					if len(sp.OldStyleOffsets) == 1 {
						got = sp.OldStyleOffsets[0]
					}
				}
				if sp.ErrorCode != 0 || got != wantOff {
					t.Errorf("ListOffsets v%d ts %d: error %d offset %d (old style %v), want %d", v, ts, sp.ErrorCode, sp.Offset, sp.OldStyleOffsets, wantOff)
				}
			}
		}
	})

	t.Run("DescribeConfigs", func(t *testing.T) {
		for _, v := range versions(32) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.Version = v
			req.IncludeSynonyms = v >= 1
			req.IncludeDocumentation = v >= 3
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
			req.Resources = append(req.Resources, rr)
			rb := kmsg.NewDescribeConfigsRequestResource()
			rb.ResourceType, rb.ResourceName = kmsg.ConfigResourceTypeBroker, fmt.Sprint(nodeID)
			req.Resources = append(req.Resources, rb)
			resp := c.roundTripStrict(t, req).(*kmsg.DescribeConfigsResponse)
			if len(resp.Resources) != 2 {
				t.Errorf("DescribeConfigs v%d: %d resources", v, len(resp.Resources))
				continue
			}
			found := false
			for _, cfg := range resp.Resources[0].Configs {
				if cfg.Name == "retention.ms" {
					found = cfg.Value != nil && *cfg.Value == "123456"
					if v >= 1 && cfg.Source != kmsg.ConfigSourceDynamicTopicConfig {
						t.Errorf("DescribeConfigs v%d: retention.ms source %v", v, cfg.Source)
					}
					if v == 0 && cfg.IsDefault {
						t.Errorf("DescribeConfigs v0: retention.ms is_default true for an override")
					}
				}
			}
			if resp.Resources[0].ErrorCode != 0 || !found {
				t.Errorf("DescribeConfigs v%d: topic error %d, retention.ms=123456 found %v", v, resp.Resources[0].ErrorCode, found)
			}
			if resp.Resources[1].ErrorCode != 0 || len(resp.Resources[1].Configs) == 0 {
				t.Errorf("DescribeConfigs v%d: broker error %d, %d configs", v, resp.Resources[1].ErrorCode, len(resp.Resources[1].Configs))
			}
		}
	})

	t.Run("InitProducerId", func(t *testing.T) {
		seen := map[int64]bool{}
		for _, v := range versions(22) {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version = v
			req.TransactionTimeoutMillis = 60000
			req.ProducerID, req.ProducerEpoch = -1, -1
			resp := c.roundTripStrict(t, req).(*kmsg.InitProducerIDResponse)
			if resp.ErrorCode != 0 || resp.ProducerID < 0 || seen[resp.ProducerID] {
				t.Errorf("InitProducerId v%d: error %d producer id %d epoch %d", v, resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch)
			}
			seen[resp.ProducerID] = true
		}
	})

	t.Run("CreateDeleteTopics", func(t *testing.T) {
		for _, v := range versions(19) {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version = v
			req.TimeoutMillis = 10000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("sweep-created-%d", v), 2, 1
			req.Topics = append(req.Topics, rt)
			resp := c.roundTripStrict(t, req).(*kmsg.CreateTopicsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
				t.Errorf("CreateTopics v%d: %+v", v, resp.Topics)
				continue
			}
			if v >= 5 && (resp.Topics[0].NumPartitions != 2 || resp.Topics[0].ReplicationFactor != 1) {
				t.Errorf("CreateTopics v%d: reports %d partitions, RF %d", v, resp.Topics[0].NumPartitions, resp.Topics[0].ReplicationFactor)
			}
			if v >= 7 && resp.Topics[0].TopicID == ([16]byte{}) {
				t.Errorf("CreateTopics v%d: zero topic id", v)
			}
		}
		delVersions := versions(20)
		for i, v := range versions(19) {
			dv := delVersions[i%len(delVersions)]
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.Version = dv
			req.TimeoutMillis = 10000
			name := fmt.Sprintf("sweep-created-%d", v)
			req.TopicNames = []string{name}
			dt := kmsg.NewDeleteTopicsRequestTopic()
			dt.Topic = kmsg.StringPtr(name)
			req.Topics = []kmsg.DeleteTopicsRequestTopic{dt}
			resp := c.roundTripStrict(t, req).(*kmsg.DeleteTopicsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
				t.Errorf("DeleteTopics v%d of %s: %+v", dv, name, resp.Topics)
			}
		}
	})
}

// countRecords counts the records in a fetched RecordBatches blob, skipping
// a partial trailing batch.
func countRecords(raw []byte) (int, error) {
	n := 0
	for len(raw) >= 12 {
		sz := int(binary.BigEndian.Uint32(raw[8:12])) + 12
		if sz > len(raw) {
			break
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw[:sz]); err != nil {
			return n, err
		}
		n += int(rb.NumRecords)
		raw = raw[sz:]
	}
	return n, nil
}
