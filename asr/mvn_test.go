package asr

import (
	"strings"
	"testing"
)

const testMVN = `<Nnet>
<Splice> 3 3
[ 0 ]
<AddShift> 3 3
<LearnRateCoef> 0 [ -1.5 -2 -2.5 ]
<Rescale> 3 3
<LearnRateCoef> 0 [ 0.5 0.25
 0.125 ]
</Nnet>
`

func TestParseAMMVN(t *testing.T) {
	nm, is, err := ParseAMMVN(strings.NewReader(testMVN), "am.mvn")
	if err != nil {
		t.Fatal(err)
	}
	if len(nm) != 3 || nm[0] != -1.5 || nm[2] != -2.5 || len(is) != 3 || is[2] != 0.125 {
		t.Fatalf("neg_mean %v inv_std %v", nm, is)
	}
	bad := map[string]string{
		"empty":        "",
		"no rescale":   "<AddShift> 1 1\n<LearnRateCoef> 0 [ 1 ]\n",
		"no addshift":  "<Rescale> 1 1\n<LearnRateCoef> 0 [ 1 ]\n",
		"not a number": "<AddShift> 1 1\n<LearnRateCoef> 0 [ x ]\n<Rescale> 1 1\n<LearnRateCoef> 0 [ 1 ]\n",
		"wrong count":  "<AddShift> 2 2\n<LearnRateCoef> 0 [ 1 ]\n<Rescale> 2 2\n<LearnRateCoef> 0 [ 1 2 ]\n",
		"mismatch":     "<AddShift> 1 1\n<LearnRateCoef> 0 [ 1 ]\n<Rescale> 2 2\n<LearnRateCoef> 0 [ 1 2 ]\n",
	}
	for name, in := range bad {
		_, _, err := ParseAMMVN(strings.NewReader(in), "am.mvn")
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "am.mvn") {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
	}
}

func FuzzParseAMMVN(f *testing.F) {
	f.Add([]byte(testMVN))
	f.Add([]byte("<AddShift> 1 1 [ 1 ] <Rescale> 1 1 [ 2 ]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		nm, is, err := ParseAMMVN(strings.NewReader(string(b)), "am.mvn")
		if err == nil && (len(nm) != len(is) || len(nm) == 0) {
			t.Fatalf("accepted %d and %d values", len(nm), len(is))
		}
	})
}
