internal import COpenSSL

/// Whether 32 bytes decode to a point of edwards25519 (RFC 8032 section
/// 5.1.3), for ``SigningPublicKey``.
///
/// OpenSSL takes any 32 bytes as an Ed25519 public key and only finds out at
/// the first verification that they are no point at all; such a key then
/// verifies nothing. A configured signer key that can never verify is a
/// mistake the user should hear about when the key is read, not as
/// "signature does not verify" on every bundle, so the decoding step is done
/// here: x² = (y² − 1) / (d·y² + 1) mod p must have a square root, and x = 0
/// must come with a clear sign bit. The arithmetic is on public data, so
/// OpenSSL's plain (not constant-time) big numbers are fine.
enum Ed25519Point {
    /// True when `raw` (32 bytes, y little-endian with x's sign in the top
    /// bit, y already known to be below p) is the encoding of a curve point.
    /// False also when OpenSSL cannot compute (out of memory): a key that
    /// cannot be checked is not taken.
    static func isOnCurve(_ raw: [UInt8]) -> Bool {
        guard raw.count == 32 else { return false }
        return OpenSSLErrorQueue.discardingNewErrors { () -> Bool in
            guard let ctx = BN_CTX_new() else { return false }
            defer { BN_CTX_free(ctx) }
            BN_CTX_start(ctx)
            defer { BN_CTX_end(ctx) }
            let numbers = (0..<8).compactMap { _ in BN_CTX_get(ctx) }
            guard numbers.count == 8 else { return false }
            return decodes(raw, numbers: numbers, ctx: ctx)
        }
    }

    /// The decoding proper, in eight big numbers from the caller's context.
    /// Returns false on any OpenSSL failure.
    private static func decodes(_ raw: [UInt8], numbers n: [OpaquePointer], ctx: OpaquePointer) -> Bool {
        let (p, d, y, u, v, scratch, exponent, result) = (n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7])
        var yBytes = raw
        let xIsOdd = yBytes[31] & 0x80 != 0
        yBytes[31] &= 0x7F
        // p = 2^255 − 19; d = −121665 / 121666 mod p.
        guard BN_set_word(p, 1) == 1, BN_lshift(p, p, 255) == 1, BN_sub_word(p, 19) == 1,
              BN_set_word(scratch, 121_666) == 1, BN_mod_inverse(d, scratch, p, ctx) != nil,
              BN_set_word(scratch, 121_665) == 1, BN_sub(scratch, p, scratch) == 1,
              BN_mod_mul(d, d, scratch, p, ctx) == 1,
              BN_lebin2bn(yBytes, Int32(yBytes.count), y) != nil,
              // u = y² − 1, v = d·y² + 1 (mod p)
              BN_mod_sqr(scratch, y, p, ctx) == 1,
              BN_mod_sub(u, scratch, BN_value_one(), p, ctx) == 1,
              BN_mod_mul(v, d, scratch, p, ctx) == 1,
              BN_mod_add(v, v, BN_value_one(), p, ctx) == 1
        else { return false }
        // x = 0: a point only when the sign bit says x is even.
        if BN_is_zero(u) == 1 { return !xIsOdd }
        // v is never 0 (−1/d is not a square mod p); checked all the same.
        guard BN_is_zero(v) == 0,
              BN_mod_inverse(scratch, v, p, ctx) != nil,
              BN_mod_mul(scratch, u, scratch, p, ctx) == 1, // x² = u / v
              // Euler's criterion: x² is a square iff (x²)^((p−1)/2) = 1.
              BN_sub(exponent, p, BN_value_one()) == 1, BN_rshift1(exponent, exponent) == 1,
              BN_mod_exp(result, scratch, exponent, p, ctx) == 1
        else { return false }
        return BN_is_one(result) == 1
    }
}
