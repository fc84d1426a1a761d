//! The `.npy` header dictionary (`{'descr': ..., 'fortran_order': ...,
//! 'shape': (...)}`): a small tokenizer and parser for the Python literal
//! subset numpy writes, and the mapping from type strings to [`DType`].

use qport_core::DType;

/// The dtypes `.npy` holds: the type string (`descr`) qport writes and
/// numpy's one-letter code for the same type. numpy has no native bfloat16
/// or low-precision (float8, float4, int4, int2) dtypes; ml_dtypes' are not
/// part of the .npy format.
pub(super) const NPY_TYPES: [(DType, &str, &str); 12] = [
    (DType::F16, "<f2", "e"),
    (DType::F32, "<f4", "f"),
    (DType::F64, "<f8", "d"),
    (DType::I8, "|i1", "b"),
    (DType::U8, "|u1", "B"),
    (DType::I16, "<i2", "h"),
    (DType::U16, "<u2", "H"),
    (DType::I32, "<i4", "i"),
    (DType::U32, "<u4", "I"),
    (DType::I64, "<i8", "q"),
    (DType::U64, "<u8", "Q"),
    (DType::Bool, "|b1", "?"),
];

/// The dtype of a numpy type string, refusing big-endian multi-byte types.
pub(super) fn dtype_of_descr(descr: &str) -> std::result::Result<DType, String> {
    let (order, code) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('=', descr),
    };
    let Some(&(dtype, _, _)) = NPY_TYPES
        .iter()
        .find(|(_, written, letter)| written[1..] == *code || *letter == code)
    else {
        return Err(format!(
            "unsupported numpy dtype '{descr}' (qport reads float16/32/64, int8-64, uint8-64 and bool)"
        ));
    };
    let big = order == '>' || (order == '=' && cfg!(target_endian = "big"));
    if big && dtype.size_of() > 1 {
        return Err(format!(
            "big-endian arrays ('{descr}') are not supported; convert with a.astype(a.dtype.newbyteorder('<'))"
        ));
    }
    Ok(dtype)
}

/// The fields of a `.npy` header dictionary.
#[derive(Debug, PartialEq)]
pub(super) struct Header {
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<u64>,
}

#[derive(Debug, PartialEq)]
enum Tok {
    Punct(char),
    Str(String),
    Int(u64),
    Ident(String),
}

fn tokenize(s: &str) -> std::result::Result<Vec<Tok>, String> {
    let mut toks = vec![];
    let cs: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '{' | '}' | '(' | ')' | '[' | ']' | ',' | ':' => {
                toks.push(Tok::Punct(c));
                i += 1;
            }
            '\'' | '"' => {
                let q = c;
                let mut j = i + 1;
                let mut out = String::new();
                while j < cs.len() && cs[j] != q {
                    out.push(cs[j]);
                    j += 1;
                }
                if j >= cs.len() {
                    return Err("unterminated string".into());
                }
                toks.push(Tok::Str(out));
                i = j + 1;
            }
            c if c.is_ascii_digit() => {
                let mut j = i;
                while j < cs.len() && cs[j].is_ascii_digit() {
                    j += 1;
                }
                let txt: String = cs[i..j].iter().collect();
                let n = txt
                    .parse::<u64>()
                    .map_err(|_| format!("dimension {txt} does not fit in 64 bits"))?;
                // Python 2 wrote long integers with an `L` suffix.
                if j < cs.len() && (cs[j] == 'L' || cs[j] == 'l') {
                    j += 1;
                }
                toks.push(Tok::Int(n));
                i = j;
            }
            '-' => return Err("negative dimension".into()),
            c if c.is_alphabetic() || c == '_' => {
                let mut j = i;
                while j < cs.len() && (cs[j].is_alphanumeric() || cs[j] == '_') {
                    j += 1;
                }
                toks.push(Tok::Ident(cs[i..j].iter().collect()));
                i = j;
            }
            c => return Err(format!("unexpected character {c:?}")),
        }
    }
    Ok(toks)
}

/// Parses the header dictionary text.
pub(super) fn parse_header(s: &str) -> std::result::Result<Header, String> {
    let toks = tokenize(s)?;
    let mut it = toks.iter().peekable();
    let expect = |t: Option<&Tok>, c: char| -> std::result::Result<(), String> {
        match t {
            Some(Tok::Punct(p)) if *p == c => Ok(()),
            other => Err(format!("expected '{c}', found {other:?}")),
        }
    };
    expect(it.next(), '{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        match it.next() {
            Some(Tok::Punct('}')) => break,
            Some(Tok::Str(k)) => {
                expect(it.next(), ':')?;
                match k.as_str() {
                    "descr" => match it.next() {
                        Some(Tok::Str(d)) => descr = Some(d.clone()),
                        Some(Tok::Punct('[')) => {
                            return Err("structured (record) dtypes are not supported".into())
                        }
                        other => return Err(format!("'descr' must be a string, found {other:?}")),
                    },
                    "fortran_order" => match it.next() {
                        Some(Tok::Ident(b)) if b == "True" => fortran = Some(true),
                        Some(Tok::Ident(b)) if b == "False" => fortran = Some(false),
                        other => {
                            return Err(format!(
                                "'fortran_order' must be True or False, found {other:?}"
                            ))
                        }
                    },
                    "shape" => {
                        expect(it.next(), '(')?;
                        let mut dims = vec![];
                        loop {
                            match it.next() {
                                Some(Tok::Punct(')')) => break,
                                Some(Tok::Int(n)) => {
                                    dims.push(*n);
                                    match it.next() {
                                        Some(Tok::Punct(',')) => {}
                                        Some(Tok::Punct(')')) => break,
                                        other => {
                                            return Err(format!("bad shape tuple near {other:?}"))
                                        }
                                    }
                                }
                                other => return Err(format!("bad shape tuple near {other:?}")),
                            }
                        }
                        shape = Some(dims);
                    }
                    other => return Err(format!("unknown key '{other}'")),
                }
                match it.peek() {
                    Some(Tok::Punct(',')) => {
                        it.next();
                    }
                    Some(Tok::Punct('}')) => {}
                    other => return Err(format!("expected ',' or '}}', found {other:?}")),
                }
            }
            other => return Err(format!("expected a key, found {other:?}")),
        }
    }
    if let Some(t) = it.next() {
        return Err(format!("unexpected {t:?} after the dictionary"));
    }
    Ok(Header {
        descr: descr.ok_or("missing 'descr'")?,
        fortran_order: fortran.ok_or("missing 'fortran_order'")?,
        shape: shape.ok_or("missing 'shape'")?,
    })
}
