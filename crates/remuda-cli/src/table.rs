//! Text tables for people: each column as wide as its widest cell, measured in terminal
//! columns (a CJK character takes two, a combining mark none), so that long kind lists and
//! wide names do not push the columns after them out of line.

use unicode_width::UnicodeWidthStr;

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A table with a header row.
pub struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns (header, alignment).
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            columns: columns.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; a missing cell is empty.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The lines of the table: the header, then each row; no line ends in spaces.
    pub fn lines(&self) -> Vec<String> {
        let cell = |row: &[String], i: usize| row.get(i).cloned().unwrap_or_default();
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (header, _))| {
                self.rows
                    .iter()
                    .map(|r| cell(r, i).width())
                    .chain([header.as_str().width()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let header: Vec<String> = self.columns.iter().map(|(h, _)| h.clone()).collect();
        std::iter::once(&header)
            .chain(&self.rows)
            .map(|row| {
                let mut line = String::new();
                for (i, (_, align)) in self.columns.iter().enumerate() {
                    let text = cell(row, i);
                    let pad = " ".repeat(widths[i].saturating_sub(text.width()));
                    if i > 0 {
                        line.push_str("  ");
                    }
                    match align {
                        Align::Left => {
                            line.push_str(&text);
                            line.push_str(&pad);
                        }
                        Align::Right => {
                            line.push_str(&pad);
                            line.push_str(&text);
                        }
                    }
                }
                line.trim_end().to_string()
            })
            .collect()
    }

    /// Prints the table on stdout.
    pub fn print(&self) {
        for line in self.lines() {
            crate::out!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_names_and_long_cells_keep_the_columns_in_line() {
        let mut table = Table::new(&[
            ("ID", Align::Right),
            ("KIND", Align::Left),
            ("QUEUE", Align::Left),
        ]);
        table.row(vec!["7".into(), "メール送信".into(), "q".into()]);
        table.row(vec![
            "12345".into(),
            "a_very_long_kind_name_indeed_yes".into(),
            "default".into(),
        ]);
        let lines = table.lines();
        let queue_column = |line: &str| {
            let at = line.rfind("  ").expect("a separator") + 2;
            line[..at].width()
        };
        assert_eq!(
            queue_column(&lines[0]),
            queue_column(&lines[1]),
            "{lines:#?}"
        );
        assert_eq!(
            queue_column(&lines[1]),
            queue_column(&lines[2]),
            "{lines:#?}"
        );
        assert!(lines[1].starts_with("    7  メール送信"), "{lines:#?}");
    }
}
