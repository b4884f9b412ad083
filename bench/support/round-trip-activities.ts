/** The one activity of bench/workflows/round-trip.ts. */
export const roundTripActivities = {
  async echo(text: string): Promise<string> {
    return text;
  },
};

export type RoundTripActivities = typeof roundTripActivities;
