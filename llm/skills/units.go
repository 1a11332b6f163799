package skills

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// ErrUnit is wrapped by unit-conversion errors.
var ErrUnit = errors.New("skills: bad unit conversion")

type unit struct {
	id     string // canonical name, singular
	plural string
	zh     string // Chinese name
	dim    string // length, mass, volume, time, speed, temperature, area, data
	factor float64
	offset float64 // temperature only: base = v*factor + offset (base is kelvin)
}

var units = []unit{
	{"metre", "metres", "米", "length", 1, 0},
	{"kilometre", "kilometres", "公里", "length", 1000, 0},
	{"centimetre", "centimetres", "厘米", "length", 0.01, 0},
	{"millimetre", "millimetres", "毫米", "length", 0.001, 0},
	{"mile", "miles", "英里", "length", 1609.344, 0},
	{"yard", "yards", "码", "length", 0.9144, 0},
	{"foot", "feet", "英尺", "length", 0.3048, 0},
	{"inch", "inches", "英寸", "length", 0.0254, 0},
	{"kilogram", "kilograms", "公斤", "mass", 1, 0},
	{"gram", "grams", "克", "mass", 0.001, 0},
	{"pound", "pounds", "磅", "mass", 0.45359237, 0},
	{"ounce", "ounces", "盎司", "mass", 0.028349523125, 0},
	{"jin", "jin", "斤", "mass", 0.5, 0},
	{"tonne", "tonnes", "吨", "mass", 1000, 0},
	{"litre", "litres", "升", "volume", 1, 0},
	{"millilitre", "millilitres", "毫升", "volume", 0.001, 0},
	{"gallon", "gallons", "加仑", "volume", 3.785411784, 0},
	{"cup", "cups", "杯", "volume", 0.2365882365, 0},
	{"second", "seconds", "秒", "time", 1, 0},
	{"minute", "minutes", "分钟", "time", 60, 0},
	{"hour", "hours", "小时", "time", 3600, 0},
	{"day", "days", "天", "time", 86400, 0},
	{"week", "weeks", "周", "time", 604800, 0},
	{"kilometre per hour", "kilometres per hour", "公里每小时", "speed", 1 / 3.6, 0},
	{"mile per hour", "miles per hour", "英里每小时", "speed", 0.44704, 0},
	{"metre per second", "metres per second", "米每秒", "speed", 1, 0},
	{"degree celsius", "degrees celsius", "摄氏度", "temperature", 1, 273.15},
	{"degree fahrenheit", "degrees fahrenheit", "华氏度", "temperature", 5.0 / 9, 273.15 - 32*5.0/9},
	{"kelvin", "kelvin", "开尔文", "temperature", 1, 0},
	{"square metre", "square metres", "平方米", "area", 1, 0},
	{"square foot", "square feet", "平方英尺", "area", 0.09290304, 0},
	{"acre", "acres", "英亩", "area", 4046.8564224, 0},
	{"hectare", "hectares", "公顷", "area", 10000, 0},
	{"byte", "bytes", "字节", "data", 1, 0},
	{"kilobyte", "kilobytes", "千字节", "data", 1000, 0},
	{"megabyte", "megabytes", "兆字节", "data", 1e6, 0},
	{"gigabyte", "gigabytes", "吉字节", "data", 1e9, 0},
}

// aliases map spoken and written names onto unit ids.
var aliases = map[string]string{
	"m": "metre", "meter": "metre", "meters": "metre", "metres": "metre",
	"km": "kilometre", "kilometer": "kilometre", "kilometers": "kilometre", "kms": "kilometre", "千米": "kilometre", "kilo metres": "kilometre",
	"cm": "centimetre", "centimeter": "centimetre", "centimeters": "centimetre",
	"mm": "millimetre", "millimeter": "millimetre", "millimeters": "millimetre",
	"mi": "mile", "ft": "foot", "yd": "yard", "公尺": "metre",
	"kg": "kilogram", "kilo": "kilogram", "kilos": "kilogram", "千克": "kilogram",
	"g": "gram", "gramme": "gram", "grams": "gram", "lb": "pound", "lbs": "pound", "oz": "ounce",
	"ton": "tonne", "tons": "tonne", "t": "tonne", "公吨": "tonne",
	"l": "litre", "liter": "litre", "liters": "litre", "litres": "litre", "公升": "litre",
	"ml": "millilitre", "milliliter": "millilitre", "milliliters": "millilitre", "gal": "gallon",
	"s": "second", "sec": "second", "secs": "second", "min": "minute", "mins": "minute",
	"h": "hour", "hr": "hour", "hrs": "hour", "分": "minute", "钟头": "hour", "个小时": "hour", "星期": "week",
	"kph": "kilometre per hour", "km/h": "kilometre per hour", "kmh": "kilometre per hour",
	"kilometers per hour": "kilometre per hour", "mph": "mile per hour", "m/s": "metre per second",
	"meters per second": "metre per second", "时速": "kilometre per hour",
	"c": "degree celsius", "celsius": "degree celsius", "centigrade": "degree celsius", "°c": "degree celsius",
	"degrees c": "degree celsius", "degree c": "degree celsius", "度": "degree celsius",
	"f": "degree fahrenheit", "fahrenheit": "degree fahrenheit", "°f": "degree fahrenheit",
	"degrees f": "degree fahrenheit", "degree f": "degree fahrenheit", "farenheit": "degree fahrenheit",
	"k": "kelvin", "kelvins": "kelvin",
	"square meters": "square metre", "square meter": "square metre", "sq m": "square metre", "m2": "square metre",
	"sq ft": "square foot", "square feet": "square foot",
	"kb": "kilobyte", "mb": "megabyte", "gb": "gigabyte",
}

var unitIndex = func() map[string]*unit {
	m := map[string]*unit{}
	for i := range units {
		u := &units[i]
		m[u.id], m[u.plural], m[u.zh] = u, u, u
	}
	for a, id := range aliases {
		m[a] = m[id]
	}
	return m
}()

// unitNames lists every name, longest first, for scanning text.
var unitNames = func() []string {
	var names []string
	for n := range unitIndex {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if len(names[i]) != len(names[j]) {
			return len(names[i]) > len(names[j])
		}
		return names[i] < names[j]
	})
	return names
}()

func lookupUnit(name string) (*unit, bool) {
	name = strings.TrimSpace(strings.ToLower(name))
	name = strings.TrimSuffix(name, ".")
	if u, ok := unitIndex[name]; ok {
		return u, true
	}
	if u, ok := unitIndex[strings.TrimSuffix(name, "s")]; ok {
		return u, true
	}
	return nil, false
}

// Convert converts value between two units named in English or Chinese.
func Convert(value float64, from, to string) (float64, *unit, *unit, error) {
	uf, ok := lookupUnit(from)
	if !ok {
		return 0, nil, nil, fmt.Errorf("%w: unknown unit %q", ErrUnit, from)
	}
	ut, ok := lookupUnit(to)
	if !ok {
		return 0, nil, nil, fmt.Errorf("%w: unknown unit %q", ErrUnit, to)
	}
	if uf.dim != ut.dim {
		return 0, nil, nil, fmt.Errorf("%w: cannot convert %s (%s) to %s (%s)", ErrUnit, uf.plural, uf.dim, ut.plural, ut.dim)
	}
	base := value*uf.factor + uf.offset
	out := (base - ut.offset) / ut.factor
	if math.IsInf(out, 0) || math.IsNaN(out) {
		return 0, nil, nil, fmt.Errorf("%w: %v %s is out of range", ErrUnit, value, uf.plural)
	}
	return out, uf, ut, nil
}

func (u *unit) name(v float64, zh bool) string {
	if zh {
		return u.zh
	}
	if v == 1 {
		return u.id
	}
	return u.plural
}
