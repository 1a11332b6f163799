package kokoro

// builtinV1 is Kokoro v1.0's phoneme vocabulary (token id: code point), for a model that
// comes without it: kokoro-onnx's release (kokoro-v1.0.onnx and voices-v1.0.bin) ships no
// config.json and writes none into the graph. It is the "vocab" of the config.json that
// hexgrad/Kokoro-82M and kokoro-onnx publish for v1.0 (n_token 178); the test fixture's
// config.json holds the same table, and a test compares the two.
var builtinV1 = map[int64]rune{
	1:   0x003B, // ;
	2:   0x003A, // :
	3:   0x002C, // ,
	4:   0x002E, // .
	5:   0x0021, // !
	6:   0x003F, // ?
	9:   0x2014, // —
	10:  0x2026, // …
	11:  0x0022, // "
	12:  0x0028, // (
	13:  0x0029, // )
	14:  0x201C, // “
	15:  0x201D, // ”
	16:  0x0020, //
	17:  0x0303, // U+0303
	18:  0x02A3, // ʣ
	19:  0x02A5, // ʥ
	20:  0x02A6, // ʦ
	21:  0x02A8, // ʨ
	22:  0x1D5D, // ᵝ
	23:  0xAB67, // ꭧ
	24:  0x0041, // A
	25:  0x0049, // I
	31:  0x004F, // O
	33:  0x0051, // Q
	35:  0x0053, // S
	36:  0x0054, // T
	39:  0x0057, // W
	41:  0x0059, // Y
	42:  0x1D4A, // ᵊ
	43:  0x0061, // a
	44:  0x0062, // b
	45:  0x0063, // c
	46:  0x0064, // d
	47:  0x0065, // e
	48:  0x0066, // f
	50:  0x0068, // h
	51:  0x0069, // i
	52:  0x006A, // j
	53:  0x006B, // k
	54:  0x006C, // l
	55:  0x006D, // m
	56:  0x006E, // n
	57:  0x006F, // o
	58:  0x0070, // p
	59:  0x0071, // q
	60:  0x0072, // r
	61:  0x0073, // s
	62:  0x0074, // t
	63:  0x0075, // u
	64:  0x0076, // v
	65:  0x0077, // w
	66:  0x0078, // x
	67:  0x0079, // y
	68:  0x007A, // z
	69:  0x0251, // ɑ
	70:  0x0250, // ɐ
	71:  0x0252, // ɒ
	72:  0x00E6, // æ
	75:  0x03B2, // β
	76:  0x0254, // ɔ
	77:  0x0255, // ɕ
	78:  0x00E7, // ç
	80:  0x0256, // ɖ
	81:  0x00F0, // ð
	82:  0x02A4, // ʤ
	83:  0x0259, // ə
	85:  0x025A, // ɚ
	86:  0x025B, // ɛ
	87:  0x025C, // ɜ
	90:  0x025F, // ɟ
	92:  0x0261, // ɡ
	99:  0x0265, // ɥ
	101: 0x0268, // ɨ
	102: 0x026A, // ɪ
	103: 0x029D, // ʝ
	110: 0x026F, // ɯ
	111: 0x0270, // ɰ
	112: 0x014B, // ŋ
	113: 0x0273, // ɳ
	114: 0x0272, // ɲ
	115: 0x0274, // ɴ
	116: 0x00F8, // ø
	118: 0x0278, // ɸ
	119: 0x03B8, // θ
	120: 0x0153, // œ
	123: 0x0279, // ɹ
	125: 0x027E, // ɾ
	126: 0x027B, // ɻ
	128: 0x0281, // ʁ
	129: 0x027D, // ɽ
	130: 0x0282, // ʂ
	131: 0x0283, // ʃ
	132: 0x0288, // ʈ
	133: 0x02A7, // ʧ
	135: 0x028A, // ʊ
	136: 0x028B, // ʋ
	138: 0x028C, // ʌ
	139: 0x0263, // ɣ
	140: 0x0264, // ɤ
	142: 0x03C7, // χ
	143: 0x028E, // ʎ
	147: 0x0292, // ʒ
	148: 0x0294, // ʔ
	156: 0x02C8, // ˈ
	157: 0x02CC, // ˌ
	158: 0x02D0, // ː
	162: 0x02B0, // ʰ
	164: 0x02B2, // ʲ
	169: 0x2193, // ↓
	171: 0x2192, // →
	172: 0x2197, // ↗
	173: 0x2198, // ↘
	177: 0x1D7B, // ᵻ
}

// BuiltinV1Vocab returns Kokoro v1.0's vocabulary.
func BuiltinV1Vocab() Vocab {
	v := make(Vocab, len(builtinV1))
	for id, r := range builtinV1 {
		v[r] = id
	}
	return v
}
