//! Reads the member ID and cluster ID a data dir belongs to from its WAL's
//! metadata record, without starting etcd (rule 3: the data dir itself is the
//! record of membership, not a file of ours).
//!
//! # Format (etcd 2.x and 3.x alike)
//! A WAL dir holds segments named `<seq hex16>-<index hex16>.wal`. Each
//! segment is a run of frames, ended by end of file or by a zero length word
//! (segments are preallocated with zeros):
//! - an 8-byte little-endian word: the low 56 bits are the record length; when
//!   the top byte's high bit is set, its low 3 bits are the padding count;
//! - the record, a `walpb.Record` protobuf (`type` = 1 varint, `crc` = 2
//!   varint, `data` = 3 bytes);
//! - the padding, which keeps every length word 8-byte aligned.
//!
//! Every segment opens with a CRC record (type 4, the running CRC carried
//! over from the previous segment) and then the metadata record (type 1),
//! whose data is `etcdserverpb.Metadata { NodeID = 1, ClusterID = 2 }`. Each
//! non-CRC record's `crc` is CRC-32C over the data of all records so far, so
//! we check it: a flipped bit in an ID must not silently give another ID.
//!
//! Reading is bounded and never panics: whatever the bytes, the answer is an
//! ID pair or a [`WalError`] that names the file and what is wrong with it.

use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WalIds {
    pub member_id: u64,
    pub cluster_id: u64,
}

/// Hex, as etcd's logs and `member list` tables print IDs.
impl std::fmt::Display for WalIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "member {:x} of cluster {:x}",
            self.member_id, self.cluster_id
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalError {
    pub file: PathBuf,
    pub problem: String,
}

impl std::fmt::Display for WalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.problem)
    }
}
impl std::error::Error for WalError {}

/// Record types of `walpb.Record`.
const METADATA_TYPE: i64 = 1;
const CRC_TYPE: i64 = 4;
const SNAPSHOT_TYPE: i64 = 5;

/// etcd refuses WAL records this large or larger; so do we, before
/// allocating anything.
const MAX_RECORD_BYTES: u64 = 10 * 1024 * 1024;

/// `<data_dir>/member/wal`, where etcd keeps the WAL unless `wal-dir` is set.
pub fn wal_dir_of(data_dir: &Path) -> PathBuf {
    data_dir.join("member").join("wal")
}

/// `Ok(None)`: `data_dir/member/wal` holds no `*.wal` (no member lives here).
/// `Err`: there is a WAL but it cannot be read or makes no sense.
pub fn read_ids(data_dir: &Path) -> Result<Option<WalIds>, WalError> {
    read_ids_in_wal_dir(&wal_dir_of(data_dir))
}

/// `read_ids` for a WAL kept apart from its data dir (`wal-dir`).
pub fn read_ids_in_wal_dir(wal_dir: &Path) -> Result<Option<WalIds>, WalError> {
    let Some(segment) = first_segment(wal_dir)? else {
        return Ok(None);
    };
    let err = |problem: String| WalError {
        file: segment.clone(),
        problem,
    };
    let file = std::fs::File::open(&segment).map_err(|e| err(format!("cannot open: {e}")))?;
    let len = file
        .metadata()
        .map_err(|e| err(format!("cannot stat: {e}")))?
        .len();
    // The metadata record sits near the start; the buffer only saves syscalls.
    let reader = std::io::BufReader::with_capacity(64 * 1024, file);
    decode_segment(reader, len).map(Some).map_err(err)
}

/// The segment etcd would read first: the lowest `(seq, index)` among the
/// files whose names parse as `<hex16>-<hex16>.wal` (etcd ignores others, and
/// so do we). `Ok(None)` when the dir is missing or holds no segment.
pub fn first_segment(wal_dir: &Path) -> Result<Option<PathBuf>, WalError> {
    let entries = match std::fs::read_dir(wal_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(WalError {
                file: wal_dir.to_path_buf(),
                problem: format!("cannot list the WAL dir: {e}"),
            })
        }
    };
    let mut best: Option<((u64, u64), PathBuf)> = None;
    for entry in entries {
        let entry = entry.map_err(|e| WalError {
            file: wal_dir.to_path_buf(),
            problem: format!("cannot list the WAL dir: {e}"),
        })?;
        let name = entry.file_name();
        let Some(key) = name.to_str().and_then(parse_segment_name) else {
            continue;
        };
        if best.as_ref().is_none_or(|(k, _)| key < *k) {
            best = Some((key, entry.path()));
        }
    }
    Ok(best.map(|(_, p)| p))
}

/// `0000000000000001-00000000000000a0.wal` → `(1, 0xa0)`.
fn parse_segment_name(name: &str) -> Option<(u64, u64)> {
    let stem = name.strip_suffix(".wal")?;
    let (seq, index) = stem.split_once('-')?;
    let hex16 = |s: &str| {
        if s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            u64::from_str_radix(s, 16).ok()
        } else {
            None
        }
    };
    Some((hex16(seq)?, hex16(index)?))
}

/// Walks the frames of one segment of `len` bytes until the first metadata
/// record, checking the CRC chain on the way. The pure half of
/// [`read_ids_in_wal_dir`]; the error is the problem without the file name.
fn decode_segment(mut r: impl Read, len: u64) -> Result<WalIds, String> {
    let mut offset: u64 = 0;
    let mut crc: u32 = 0;
    let mut n: u64 = 0;
    loop {
        if offset == len {
            return Err(format!(
                "truncated: the file ends at offset {offset} after {n} record(s), \
                 before any metadata record"
            ));
        }
        if len - offset < 8 {
            return Err(format!(
                "truncated: {} byte(s) at offset {offset} where a frame length \
                 (8 bytes) should be",
                len - offset
            ));
        }
        let mut word = [0u8; 8];
        read_exact(&mut r, &mut word, offset)?;
        let word = u64::from_le_bytes(word);
        if word == 0 {
            return Err(format!(
                "no metadata record: the records end (zero frame length) at offset \
                 {offset} after {n} record(s)"
            ));
        }
        let (rec_len, pad) = decode_frame_len(word);
        let body = offset + 8;
        if rec_len + pad >= MAX_RECORD_BYTES {
            return Err(format!(
                "frame at offset {offset} claims {rec_len} bytes, more than any WAL \
                 record may hold: not a WAL or corrupt"
            ));
        }
        if rec_len == 0 {
            return Err(format!(
                "frame at offset {offset} has a zero record length with padding \
                 flags {pad}: corrupt"
            ));
        }
        if rec_len + pad > len - body {
            return Err(format!(
                "truncated: the frame at offset {offset} needs {} byte(s) but only {} \
                 remain",
                rec_len + pad,
                len - body
            ));
        }
        // Bounded above by MAX_RECORD_BYTES and by the file's length.
        let mut buf = vec![0u8; (rec_len + pad) as usize];
        read_exact(&mut r, &mut buf, body)?;
        let rec = Record::decode(&buf[..rec_len as usize])
            .map_err(|e| format!("record {n} at offset {offset}: {e}"))?;
        if rec.kind == CRC_TYPE {
            // The running CRC carried over from the previous segment.
            if crc != 0 && rec.crc != crc {
                return Err(crc_mismatch(n, offset, rec.crc, crc));
            }
            crc = rec.crc;
        } else {
            crc = crc32c_update(crc, rec.data);
            if rec.crc != crc {
                return Err(crc_mismatch(n, offset, rec.crc, crc));
            }
            if rec.kind == METADATA_TYPE {
                return decode_metadata(rec.data)
                    .map_err(|e| format!("metadata record at offset {offset}: {e}"));
            }
        }
        offset = body + rec_len + pad;
        n += 1;
    }
}

fn crc_mismatch(n: u64, offset: u64, found: u32, want: u32) -> String {
    format!(
        "record {n} at offset {offset}: CRC mismatch (recorded {found:08x}, \
         computed {want:08x}): the WAL is corrupt"
    )
}

fn read_exact(r: &mut impl Read, buf: &mut [u8], offset: u64) -> Result<(), String> {
    r.read_exact(buf)
        .map_err(|e| format!("cannot read {} byte(s) at offset {offset}: {e}", buf.len()))
}

/// Length word → (record bytes, padding bytes).
fn decode_frame_len(word: u64) -> (u64, u64) {
    let rec_len = word & 0x00ff_ffff_ffff_ffff;
    let top = (word >> 56) as u8;
    let pad = if top & 0x80 != 0 {
        (top & 0x07) as u64
    } else {
        0
    };
    (rec_len, pad)
}

/// Length word for `rec_len` record bytes, and the padding that follows.
fn encode_frame_len(rec_len: usize) -> (u64, usize) {
    let pad = (8 - rec_len % 8) % 8;
    let mut word = rec_len as u64;
    if pad != 0 {
        word |= (0x80 | pad as u64) << 56;
    }
    (word, pad)
}

/// A decoded `walpb.Record`; missing fields take protobuf defaults.
struct Record<'a> {
    kind: i64,
    crc: u32,
    data: &'a [u8],
}

impl<'a> Record<'a> {
    fn decode(buf: &'a [u8]) -> Result<Self, String> {
        let mut rec = Record {
            kind: 0,
            crc: 0,
            data: &[],
        };
        let mut seen_type = false;
        let mut p = Proto::new(buf);
        while let Some((field, value)) = p.next_field()? {
            match (field, value) {
                (1, Value::Varint(v)) => {
                    rec.kind = v as i64;
                    seen_type = true;
                }
                (2, Value::Varint(v)) => {
                    rec.crc =
                        u32::try_from(v).map_err(|_| format!("crc {v} does not fit in 32 bits"))?;
                }
                (3, Value::Bytes(b)) => rec.data = b,
                (1..=3, _) => return Err(format!("field {field} has the wrong wire type")),
                _ => {}
            }
        }
        if !seen_type {
            return Err("not a WAL record: it has no type (field 1)".into());
        }
        Ok(rec)
    }
}

fn decode_metadata(buf: &[u8]) -> Result<WalIds, String> {
    let (mut member, mut cluster) = (None, None);
    let mut p = Proto::new(buf);
    while let Some((field, value)) = p.next_field()? {
        match (field, value) {
            (1, Value::Varint(v)) => member = Some(v),
            (2, Value::Varint(v)) => cluster = Some(v),
            (1 | 2, _) => return Err(format!("field {field} has the wrong wire type")),
            _ => {}
        }
    }
    let member_id = member.ok_or("it has no NodeID (field 1)")?;
    let cluster_id = cluster.ok_or("it has no ClusterID (field 2)")?;
    if member_id == 0 || cluster_id == 0 {
        return Err(format!(
            "it names member {member_id:x} of cluster {cluster_id:x}; etcd never uses ID 0"
        ));
    }
    Ok(WalIds {
        member_id,
        cluster_id,
    })
}

/// Just enough protobuf: a cursor over `(field number, value)` pairs.
struct Proto<'a> {
    buf: &'a [u8],
    pos: usize,
}

enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

impl<'a> Proto<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Proto { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(format!("varint cut off at byte {}", self.pos));
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err(format!("varint overflows 64 bits at byte {}", self.pos - 1));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("varint longer than 10 bytes at byte {}", self.pos))
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], String> {
        let rest = self.buf.len() - self.pos;
        if n > rest as u64 {
            return Err(format!(
                "field at byte {} wants {n} bytes but only {rest} remain",
                self.pos
            ));
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn next_field(&mut self) -> Result<Option<(u64, Value<'a>)>, String> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = key >> 3;
        if field == 0 {
            return Err(format!("field number 0 at byte {}", self.pos));
        }
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Fixed
            }
            2 => {
                let n = self.varint()?;
                Value::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Value::Fixed
            }
            w => return Err(format!("unsupported wire type {w} for field {field}")),
        };
        Ok(Some((field, value)))
    }
}

/// CRC-32C (Castagnoli), reflected polynomial.
const CRC32C_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0x82f6_3b78 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// Continues a CRC-32C: `crc32c_update(0, x)` is the CRC of `x`, and
/// `crc32c_update(crc32c_update(0, a), b)` the CRC of `a ++ b`.
fn crc32c_update(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in data {
        c = CRC32C_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends one framed record and returns the new running CRC.
fn put_record(out: &mut Vec<u8>, kind: i64, data: &[u8], crc: u32) -> u32 {
    let crc = crc32c_update(crc, data);
    let mut rec = Vec::with_capacity(data.len() + 16);
    put_varint(&mut rec, 1 << 3);
    put_varint(&mut rec, kind as u64);
    put_varint(&mut rec, 2 << 3);
    put_varint(&mut rec, u64::from(crc));
    if kind != CRC_TYPE {
        put_varint(&mut rec, (3 << 3) | 2);
        put_varint(&mut rec, data.len() as u64);
        rec.extend_from_slice(data);
    }
    let (word, pad) = encode_frame_len(rec.len());
    out.extend_from_slice(&word.to_le_bytes());
    out.extend_from_slice(&rec);
    out.resize(out.len() + pad, 0);
    crc
}

/// The bytes of a first WAL segment as a fresh etcd member writes it: a CRC
/// record, the metadata record, an empty snapshot record, then zeros standing
/// in for the preallocated space. For tests only.
#[doc(hidden)]
pub fn test_segment_bytes(ids: WalIds) -> Vec<u8> {
    let mut meta = Vec::new();
    put_varint(&mut meta, 1 << 3);
    put_varint(&mut meta, ids.member_id);
    put_varint(&mut meta, 2 << 3);
    put_varint(&mut meta, ids.cluster_id);
    let mut out = Vec::new();
    let crc = put_record(&mut out, CRC_TYPE, &[], 0);
    let crc = put_record(&mut out, METADATA_TYPE, &meta, crc);
    // walpb.Snapshot{Index: 0, Term: 0}
    put_record(&mut out, SNAPSHOT_TYPE, &[0x08, 0x00, 0x10, 0x00], crc);
    out.resize(4096, 0);
    out
}

/// Fabricates a member in `data_dir`: `member/snap/` and a first WAL segment
/// recording `ids` in `member/wal/`. Returns the segment's path. For tests
/// (ours and other modules') that need "a member lives here" without etcd.
#[doc(hidden)]
pub fn write_test_segment(data_dir: &Path, ids: WalIds) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(data_dir.join("member").join("snap"))?;
    write_test_segment_in_wal_dir(&wal_dir_of(data_dir), ids)
}

/// [`write_test_segment`] for a separate `wal-dir`.
#[doc(hidden)]
pub fn write_test_segment_in_wal_dir(wal_dir: &Path, ids: WalIds) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(wal_dir)?;
    let path = wal_dir.join("0000000000000000-0000000000000000.wal");
    std::fs::write(&path, test_segment_bytes(ids))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: WalIds = WalIds {
        member_id: 0x8e9e_05c5_2164_694d,
        cluster_id: 0xcdf8_1819_4e3a_8c32,
    };

    fn decode(bytes: &[u8]) -> Result<WalIds, String> {
        decode_segment(bytes, bytes.len() as u64)
    }

    fn metadata(member: u64, cluster: u64) -> Vec<u8> {
        let mut m = Vec::new();
        put_varint(&mut m, 1 << 3);
        put_varint(&mut m, member);
        put_varint(&mut m, 2 << 3);
        put_varint(&mut m, cluster);
        m
    }

    #[test]
    fn crc32c_known_answer() {
        assert_eq!(crc32c_update(0, b"123456789"), 0xe306_9283);
        let whole = crc32c_update(0, b"hello world");
        assert_eq!(crc32c_update(crc32c_update(0, b"hello "), b"world"), whole);
    }

    #[test]
    fn frame_length_word_round_trips() {
        for n in 0..40usize {
            let (word, pad) = encode_frame_len(n);
            assert_eq!((n + pad) % 8, 0);
            assert_eq!(decode_frame_len(word), (n as u64, pad as u64));
        }
        // Top byte 0x80|3: 3 bytes of padding after a 5-byte record.
        assert_eq!(decode_frame_len(0x8300_0000_0000_0005), (5, 3));
        // High bit clear: the top byte is not a padding count.
        assert_eq!(decode_frame_len(0x0000_0000_0000_0010), (16, 0));
    }

    #[test]
    fn reads_a_fresh_segment() {
        assert_eq!(decode(&test_segment_bytes(IDS)), Ok(IDS));
    }

    #[test]
    fn skips_records_before_metadata_and_checks_their_crc() {
        let mut seg = Vec::new();
        let crc = put_record(&mut seg, CRC_TYPE, &[], 0);
        // An odd-sized record first, so the metadata frame follows padding.
        let crc = put_record(&mut seg, 3, &[0x08, 0x05, 0x10, 0x01, 0x18], crc);
        put_record(&mut seg, METADATA_TYPE, &metadata(7, 9), crc);
        assert_eq!(
            decode(&seg),
            Ok(WalIds {
                member_id: 7,
                cluster_id: 9
            })
        );
    }

    #[test]
    fn a_later_segment_carries_the_previous_crc() {
        let mut seg = Vec::new();
        let prev = 0xdead_beef;
        // A CRC record's crc is the running CRC it carries over.
        let crc = put_record(&mut seg, CRC_TYPE, &[], prev);
        assert_eq!(crc, prev);
        put_record(&mut seg, METADATA_TYPE, &metadata(1, 2), crc);
        assert_eq!(
            decode(&seg),
            Ok(WalIds {
                member_id: 1,
                cluster_id: 2
            })
        );
    }

    #[test]
    fn a_flipped_id_bit_is_a_crc_mismatch() {
        let mut seg = test_segment_bytes(IDS);
        let mut id = Vec::new();
        put_varint(&mut id, IDS.member_id);
        let at = seg.windows(id.len()).position(|w| w == id).unwrap();
        seg[at] ^= 0x02;
        let err = decode(&seg).unwrap_err();
        assert!(err.contains("CRC mismatch"), "{err}");
    }

    #[test]
    fn corruption_cases_are_errors_that_say_why() {
        let good = test_segment_bytes(IDS);
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("empty", vec![], "truncated"),
            ("half a length word", good[..5].to_vec(), "truncated"),
            ("cut inside the metadata", good[..30].to_vec(), "truncated"),
            ("zeros only", vec![0; 64], "zero frame length"),
            (
                "length past EOF",
                {
                    let mut s = 100u64.to_le_bytes().to_vec();
                    s.extend_from_slice(&[0; 16]);
                    s
                },
                "truncated",
            ),
            (
                "huge length",
                u64::MAX.to_le_bytes().to_vec(),
                "more than any WAL record",
            ),
            (
                "zero length with padding",
                (0x83u64 << 56).to_le_bytes().repeat(3),
                "zero record length",
            ),
            (
                "garbage record",
                {
                    let mut s = 8u64.to_le_bytes().to_vec();
                    s.extend_from_slice(&[0xff; 8]);
                    s
                },
                "record 0",
            ),
        ];
        for (what, bytes, want) in cases {
            let err = decode(&bytes).expect_err(what);
            assert!(err.contains(want), "{what}: {err}");
        }
    }

    #[test]
    fn metadata_without_ids_is_an_error() {
        for (meta, want) in [
            (vec![], "no NodeID"),
            (vec![0x08, 0x05], "no ClusterID"),
            (vec![0x10, 0x05], "no NodeID"),
            (metadata(0, 5), "ID 0"),
            (vec![0x0a, 0x00], "wrong wire type"),
            (vec![0x08, 0xff], "cut off"),
            (
                vec![
                    0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
                ],
                "overflows",
            ),
        ] {
            let mut seg = Vec::new();
            let crc = put_record(&mut seg, CRC_TYPE, &[], 0);
            put_record(&mut seg, METADATA_TYPE, &meta, crc);
            let err = decode(&seg).unwrap_err();
            assert!(err.contains(want), "{meta:?}: {err}");
        }
    }

    #[test]
    fn no_metadata_before_the_end_of_records() {
        let mut seg = Vec::new();
        let crc = put_record(&mut seg, CRC_TYPE, &[], 0);
        put_record(&mut seg, 2, &[0x08, 0x01], crc);
        let at_eof = decode(&seg).unwrap_err();
        assert!(at_eof.contains("before any metadata"), "{at_eof}");
        seg.resize(seg.len() + 64, 0);
        let at_zero = decode(&seg).unwrap_err();
        assert!(at_zero.contains("no metadata record"), "{at_zero}");
    }

    #[test]
    fn unknown_fields_are_skipped() {
        let mut meta = metadata(3, 4);
        // field 9 fixed64, field 10 bytes, field 11 fixed32
        meta.extend_from_slice(&[
            0x49, 1, 2, 3, 4, 5, 6, 7, 8, 0x52, 2, 0xaa, 0xbb, 0x5d, 1, 2, 3, 4,
        ]);
        let mut seg = Vec::new();
        let crc = put_record(&mut seg, CRC_TYPE, &[], 0);
        put_record(&mut seg, METADATA_TYPE, &meta, crc);
        assert_eq!(
            decode(&seg),
            Ok(WalIds {
                member_id: 3,
                cluster_id: 4
            })
        );
    }

    /// Truncations and bit flips of a valid segment: never a panic, and a
    /// flip either leaves the IDs intact (padding, zeros, unused bits) or is
    /// caught.
    #[test]
    fn mangled_segments_never_panic_or_lie() {
        let good = test_segment_bytes(IDS);
        let meaningful = 8 * 8; // the three records end well before this
        for cut in 0..meaningful {
            let _ = decode(&good[..cut]);
        }
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for bit in 0..meaningful * 8 {
            let mut bad = good.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            if let Ok(ids) = decode(&bad) {
                assert_eq!(ids, IDS, "bit {bit} changed the IDs undetected");
            }
        }
        for _ in 0..2000 {
            let mut bad = good[..meaningful].to_vec();
            for _ in 0..(next() % 4 + 1) {
                let i = (next() % meaningful as u64) as usize;
                bad[i] = next() as u8;
            }
            let cut = (next() % (meaningful as u64 + 1)) as usize;
            let _ = decode(&bad[..cut]);
        }
    }

    #[test]
    fn segment_names_follow_etcd() {
        assert_eq!(
            parse_segment_name("0000000000000001-00000000000000a0.wal"),
            Some((1, 0xa0))
        );
        for bad in [
            "0.tmp",
            "foo.wal",
            "0000000000000001-00000000000000a0.wal.broken",
            "000000000000001-00000000000000a0.wal",
            "+000000000000001-00000000000000a0.wal",
        ] {
            assert_eq!(parse_segment_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn reads_the_first_segment_of_a_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        assert_eq!(read_ids(&data), Ok(None), "missing dir");
        std::fs::create_dir_all(wal_dir_of(&data)).unwrap();
        assert_eq!(read_ids(&data), Ok(None), "empty wal dir");
        std::fs::write(wal_dir_of(&data).join("0.tmp"), b"junk").unwrap();
        assert_eq!(read_ids(&data), Ok(None), "only a tmp file");

        write_test_segment(&data, IDS).unwrap();
        // A later segment with other IDs must not be the one read.
        let other = WalIds {
            member_id: 1,
            cluster_id: 2,
        };
        std::fs::write(
            wal_dir_of(&data).join("0000000000000001-0000000000000010.wal"),
            test_segment_bytes(other),
        )
        .unwrap();
        assert_eq!(read_ids(&data), Ok(Some(IDS)));
        assert!(data.join("member/snap").is_dir());
    }

    #[test]
    fn errors_name_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let wal = tmp.path().join("wal");
        std::fs::create_dir_all(&wal).unwrap();
        let seg = wal.join("0000000000000000-0000000000000000.wal");
        std::fs::write(&seg, [0u8; 3]).unwrap();
        let err = read_ids_in_wal_dir(&wal).unwrap_err();
        assert_eq!(err.file, seg);
        assert!(err.to_string().starts_with(&seg.display().to_string()));
        assert!(err.problem.contains("truncated"), "{err}");
    }

    #[test]
    fn ids_display_in_hex() {
        assert_eq!(
            IDS.to_string(),
            "member 8e9e05c52164694d of cluster cdf818194e3a8c32"
        );
    }
}
