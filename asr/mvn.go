package asr

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ParseAMMVN reads FunASR's am.mvn, a Kaldi nnet1 text file whose <AddShift> component holds
// the negated means and whose <Rescale> component holds the inverse standard deviations:
//
//	<Nnet>
//	<Splice> 560 560
//	[ 0 ]
//	<AddShift> 560 560
//	<LearnRateCoef> 0 [ -8.3 -8.6 … ]
//	<Rescale> 560 560
//	<LearnRateCoef> 0 [ 0.15 0.15 … ]
//	</Nnet>
//
// name is used in errors.
func ParseAMMVN(r io.Reader, name string) (negMean, invStd []float32, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	sc.Split(bufio.ScanWords)
	var cur string // component whose vector we are reading: "<AddShift>" or "<Rescale>"
	var dim int
	var vec []float32
	inVec := false
	words := 0
	for sc.Scan() {
		w := sc.Text()
		if words++; words > 1<<22 {
			return nil, nil, fmt.Errorf("%w: %s is too large for a CMVN file", ErrBadModel, name)
		}
		switch {
		case inVec && w == "]":
			inVec = false
			if cur == "" {
				continue
			}
			if dim > 0 && len(vec) != dim {
				return nil, nil, fmt.Errorf("%w: %s: %s has %d values, its header says %d", ErrBadModel, name, cur, len(vec), dim)
			}
			if cur == "<AddShift>" {
				negMean = vec
			} else {
				invStd = vec
			}
			cur, vec = "", nil
		case inVec:
			if cur == "" {
				continue
			}
			f, perr := strconv.ParseFloat(w, 32)
			if perr != nil {
				return nil, nil, fmt.Errorf("%w: %s: %s: %q is not a number", ErrBadModel, name, cur, clip(w))
			}
			vec = append(vec, float32(f))
		case w == "[":
			inVec = true
		case w == "<AddShift>" || w == "<Rescale>":
			cur, dim = w, 0
			// "<AddShift> out in": read the output dimension.
			if sc.Scan() {
				if d, perr := strconv.Atoi(sc.Text()); perr == nil && d > 0 && d <= 1<<20 {
					dim = d
				}
			}
		case strings.HasPrefix(w, "<") && w != "<LearnRateCoef>" && cur != "" && len(vec) == 0:
			// another component started before this one's vector
			return nil, nil, fmt.Errorf("%w: %s: %s has no [ … ] vector", ErrBadModel, name, cur)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadModel, name, err)
	}
	var missing []string
	if negMean == nil {
		missing = append(missing, "<AddShift> (negated means)")
	}
	if invStd == nil {
		missing = append(missing, "<Rescale> (inverse standard deviations)")
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("%w: %s: missing %s", ErrBadModel, name, strings.Join(missing, " and "))
	}
	if len(negMean) != len(invStd) {
		return nil, nil, fmt.Errorf("%w: %s: <AddShift> has %d values but <Rescale> has %d", ErrBadModel, name, len(negMean), len(invStd))
	}
	return negMean, invStd, nil
}
