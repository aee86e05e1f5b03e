package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/stackflow/stackflow/api/temporalconn"
)

func TestClearValues(t *testing.T) {
	codec := temporalconn.NewCodec(must(temporalconn.NewKeyring(map[string][]byte{"k": make([]byte, 32)})))
	clear := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{"address":"198.51.100.10"}`)}
	enc, err := codec.Encode([]*commonpb.Payload{clear})
	require.NoError(t, err)
	started := func(p *commonpb.Payload) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
				Input: &commonpb.Payloads{Payloads: []*commonpb.Payload{p}},
				// Search attributes are indexed, never encoded: not looked at.
				SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{"StackflowObject": {Data: []byte(`"edpm-0"`)}}},
			}}}
	}
	values := []string{"198.51.100.10", "edpm-0"}
	for _, tc := range []struct {
		name string
		ev   *historypb.HistoryEvent
		want []string
	}{
		{"clear input", started(clear), []string{"198.51.100.10"}},
		{"encrypted input", started(enc[0]), nil},
		{"failure message", &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{
			ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{Failure: &failurepb.Failure{Message: "ssh to 198.51.100.10: refused"}}}}, []string{"198.51.100.10"}},
		{"encoded failure", &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{
			ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{Failure: &failurepb.Failure{Message: "Encoded failure", EncodedAttributes: enc[0]}}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, clearValues(tc.ev, values))
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
