extension String {
    /// The text with `pad` in front up to `width` characters (`"  42"`,
    /// `"07"`); as it is when already that wide.
    func leftPadded(to width: Int, with pad: Character = " ") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
