package clone

import "testing"

func TestSummaryRejectedText(t *testing.T) {
	if got := (Summary{}).RejectedText(); got != "" {
		t.Errorf("nothing rejected: %q", got)
	}
	s := Summary{Rejected: map[string]int{"too short": 2, "too noisy": 1}}
	if got := s.RejectedText(); got != " (1 too noisy, 2 too short)" {
		t.Errorf("rejected text %q", got)
	}
}
